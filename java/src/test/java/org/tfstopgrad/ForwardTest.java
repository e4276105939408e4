package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.tfstopgrad.TestTensors.assertBitIdentical;

import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.tensorflow.EagerSession;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.types.family.TType;

/** Forward values side by side with TensorFlow Java's own ops, in graphs and eagerly. */
class ForwardTest {
  private static final PreventGradient.Options MESSAGE = PreventGradient.message("no gradient");

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("org.tfstopgrad.TestTensors#dataTypesAndShapes")
  <T extends TType> void graphOutputsAreTheBuiltInsBitForBit(Class<T> type, Shape shape) {
    try (Graph graph = new Graph();
        Session session = new Session(graph);
        T input = TestTensors.random(type, shape, new Random(shape.hashCode()))) {
      Ops tf = Ops.create(graph);
      Operand<T> x = tf.constantOf(input);
      Operand<T> stopped = StopGradient.create(tf.scope(), x);
      Operand<T> prevented = PreventGradient.create(tf.scope(), x, MESSAGE);
      assertEquals(shape, stopped.shape());
      assertEquals(shape, prevented.shape());
      try (Result result =
          session
              .runner()
              .fetch(stopped)
              .fetch(tf.stopGradient(x))
              .fetch(prevented)
              .fetch(tf.train.preventGradient(x, org.tensorflow.op.train.PreventGradient.message("no gradient")))
              .run()) {
        assertBitIdentical(input, result.get(1));
        assertBitIdentical(result.get(1), result.get(0));
        assertBitIdentical(result.get(3), result.get(2));
      }
    }
  }

  @ParameterizedTest(name = "{0} {1}")
  @MethodSource("org.tfstopgrad.TestTensors#dataTypesAndShapes")
  <T extends TType> void eagerOutputsAreTheBuiltInsBitForBit(Class<T> type, Shape shape) {
    try (EagerSession eager = EagerSession.create();
        T input = TestTensors.random(type, shape, new Random(shape.hashCode() + 1))) {
      Ops tf = Ops.create(eager);
      Operand<T> x = tf.constantOf(input);
      T builtin = tf.stopGradient(x).asTensor();
      assertBitIdentical(input, builtin);
      assertBitIdentical(builtin, StopGradient.create(tf.scope(), x).asTensor());
      assertBitIdentical(
          tf.train.preventGradient(x, org.tensorflow.op.train.PreventGradient.message("no gradient")).asTensor(),
          PreventGradient.create(tf.scope(), x, MESSAGE).asTensor());
    }
  }
}
