package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.provider.Arguments;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.types.TBfloat16;
import org.tensorflow.types.TBool;
import org.tensorflow.types.TFloat16;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;
import org.tensorflow.types.TString;
import org.tensorflow.types.TUint16;
import org.tensorflow.types.TUint8;
import org.tensorflow.types.family.TType;

/** Random tensors of every data type TensorFlow Java has, and bit-for-bit comparison. */
final class TestTensors {
  static final List<Class<? extends TType>> DATA_TYPES =
      List.of(
          TFloat16.class, TBfloat16.class, TFloat32.class, TFloat64.class, TInt32.class,
          TInt64.class, TUint8.class, TUint16.class, TBool.class, TString.class);
  static final List<Shape> SHAPES =
      List.of(Shape.scalar(), Shape.of(0), Shape.of(7), Shape.of(2, 3, 4), Shape.of(1, 0, 3));

  private TestTensors() {}

  /** Every data type with every shape. */
  static Stream<Arguments> dataTypesAndShapes() {
    List<Arguments> cases = new ArrayList<>();
    for (Class<? extends TType> type : DATA_TYPES) {
      for (Shape shape : SHAPES) {
        cases.add(Arguments.of(type, shape));
      }
    }
    return cases.stream();
  }

  /**
   * A tensor of random bits (so floats include NaNs and infinities); booleans are 0 or 1;
   * strings have random bytes and lengths on both sides of TensorFlow's inline-string limit.
   */
  static <T extends TType> T random(Class<T> type, Shape shape, Random random) {
    if (type == TString.class) {
      byte[][] values = new byte[(int) shape.size()][];
      for (int i = 0; i < values.length; i++) {
        values[i] = new byte[random.nextInt(40)];
        random.nextBytes(values[i]);
      }
      return type.cast(TString.tensorOfBytes(shape, DataBuffers.ofObjects(values)));
    }
    return Tensor.of(
        type,
        shape,
        tensor -> {
          byte[] bytes = new byte[(int) tensor.numBytes()];
          random.nextBytes(bytes);
          if (type == TBool.class) {
            for (int i = 0; i < bytes.length; i++) {
              bytes[i] &= 1;
            }
          }
          tensor.asRawTensor().data().write(bytes);
        });
  }

  static TFloat32 floats(Shape shape, float... values) {
    return Tensor.of(
        TFloat32.class,
        shape,
        tensor -> tensor.asRawTensor().data().write(littleEndian(values)));
  }

  static byte[] littleEndian(float... values) {
    ByteBuffer buffer = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    buffer.asFloatBuffer().put(values);
    return buffer.array();
  }

  static byte[] bytesOf(Tensor tensor) {
    byte[] bytes = new byte[(int) tensor.numBytes()];
    tensor.asRawTensor().data().read(bytes);
    return bytes;
  }

  /** Same data type, same shape, same bits (for strings: the same bytes in each element). */
  static void assertBitIdentical(Tensor expected, Tensor actual) {
    assertEquals(expected.dataType(), actual.dataType());
    assertEquals(expected.shape(), actual.shape());
    if (expected instanceof TString) {
      List<byte[]> expectedValues = new ArrayList<>();
      ((TString) expected).asBytes().scalars().forEach(s -> expectedValues.add(s.getObject()));
      List<byte[]> actualValues = new ArrayList<>();
      ((TString) actual).asBytes().scalars().forEach(s -> actualValues.add(s.getObject()));
      assertEquals(expectedValues.size(), actualValues.size());
      for (int i = 0; i < expectedValues.size(); i++) {
        assertArrayEquals(expectedValues.get(i), actualValues.get(i), "element " + i);
      }
    } else {
      assertArrayEquals(bytesOf(expected), bytesOf(actual));
    }
  }
}
