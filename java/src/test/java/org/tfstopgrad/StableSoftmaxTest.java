package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.types.TFloat32;

/**
 * The first use case, the README's Java example: a softmax that subtracts its input's maximum,
 * which must not be differentiated through. Logits this large overflow exp() without the shift.
 */
class StableSoftmaxTest {
  private static final float[] LOGITS = {1000.0f, 999.0f, 1000.0f, -3.0f, 998.5f};
  private static final float[] WEIGHTS = {0.5f, -2.0f, 1.0f, 3.0f, 0.25f};

  /** [softmax(logits), d/dlogits of sum(softmax * weights)] with the maximum held by `stop`. */
  private static byte[][] softmaxAndGradient(
      BiFunction<Ops, Operand<TFloat32>, Operand<TFloat32>> stop) {
    try (Graph graph = new Graph();
        Session session = new Session(graph);
        TFloat32 logitsValue = TestTensors.floats(Shape.of(LOGITS.length), LOGITS);
        TFloat32 weightsValue = TestTensors.floats(Shape.of(WEIGHTS.length), WEIGHTS)) {
      Ops tf = Ops.create(graph);
      Operand<TFloat32> logits = tf.constantOf(logitsValue);
      Operand<TFloat32> shifted =
          tf.math.sub(logits, stop.apply(tf, tf.max(logits, tf.constant(0))));
      Operand<TFloat32> exponentials = tf.math.exp(shifted);
      Operand<TFloat32> softmax = tf.math.div(exponentials, tf.sum(exponentials, tf.constant(0)));
      Operand<TFloat32> loss = tf.sum(tf.math.mul(softmax, tf.constantOf(weightsValue)), tf.constant(0));
      Output<?>[] gradient =
          graph.addGradients(loss.asOutput(), new Output<?>[] {logits.asOutput()});
      try (Result result = session.runner().fetch(softmax).fetch(gradient[0]).run()) {
        return new byte[][] {
          TestTensors.bytesOf(result.get(0)), TestTensors.bytesOf(result.get(1))
        };
      }
    }
  }

  @Test
  void softmaxAndItsGradientEqualTheBuiltIns() {
    byte[][] builtin = softmaxAndGradient((tf, max) -> tf.stopGradient(max));
    byte[][] ours = softmaxAndGradient((tf, max) -> StopGradient.create(tf.scope(), max));
    assertArrayEquals(builtin[0], ours[0]);
    assertArrayEquals(builtin[1], ours[1]);
  }

  @Test
  void softmaxIsFiniteAndMatchesTheFormula() {
    float[] softmax = floats(softmaxAndGradient((tf, max) -> StopGradient.create(tf.scope(), max))[0]);
    double total = 0;
    for (float logit : LOGITS) {
      total += Math.exp(logit - 1000.0);
    }
    for (int i = 0; i < LOGITS.length; i++) {
      assertTrue(Float.isFinite(softmax[i]));
      assertEquals(Math.exp(LOGITS[i] - 1000.0) / total, softmax[i], 1e-6);
    }
  }

  private static float[] floats(byte[] bytes) {
    float[] values = new float[bytes.length / 4];
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(values);
    return values;
  }
}
