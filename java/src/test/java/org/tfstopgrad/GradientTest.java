package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Output;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.exceptions.TFInvalidArgumentException;
import org.tensorflow.exceptions.TensorFlowException;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.types.TFloat32;

/**
 * Gradients through the plugin's ops, from Graph.addGradients and Ops.gradients (TensorFlow's C
 * gradient API, which reaches the op library's C++ gradients), beside the built-in ops'.
 */
class GradientTest {
  private static final float[] X = {3.0f, -1.5f, 0.25f, 8.0f};

  /** d/dx of sum(op(x) * x), computed with Graph.addGradients and fetched. */
  private static byte[] gradientOfWeightedSum(
      BiFunction<Ops, Operand<TFloat32>, Operand<TFloat32>> op) {
    try (Graph graph = new Graph();
        Session session = new Session(graph);
        TFloat32 value = TestTensors.floats(Shape.of(X.length), X)) {
      Ops tf = Ops.create(graph);
      Operand<TFloat32> x = tf.constantOf(value);
      Operand<TFloat32> loss = tf.sum(tf.math.mul(op.apply(tf, x), x), tf.constant(0));
      Output<?>[] gradient = graph.addGradients(loss.asOutput(), new Output<?>[] {x.asOutput()});
      try (Result result = session.runner().fetch(gradient[0]).run()) {
        return TestTensors.bytesOf(result.get(0));
      }
    }
  }

  @Test
  void stopGradientMasksItsInputAsTheBuiltInDoes() {
    byte[] builtin = gradientOfWeightedSum((tf, x) -> tf.stopGradient(x));
    // Only the unmasked factor is differentiated: d/dx sum(c * x) = c = x.
    assertArrayEquals(TestTensors.littleEndian(X), builtin);
    assertArrayEquals(builtin, gradientOfWeightedSum((tf, x) -> StopGradient.create(tf.scope(), x)));
  }

  @Test
  void withoutAStopTheGradientFlowsThroughBothFactors() {
    byte[] identity = gradientOfWeightedSum((tf, x) -> tf.identity(x));
    float[] twiceX = new float[X.length];
    for (int i = 0; i < X.length; i++) {
      twiceX[i] = 2 * X[i];
    }
    assertArrayEquals(TestTensors.littleEndian(twiceX), identity);
  }

  @Test
  void opsGradientsMasksAFullyStoppedPathAsTheBuiltInDoes() {
    try (Graph graph = new Graph();
        Session session = new Session(graph);
        TFloat32 value = TestTensors.floats(Shape.of(X.length), X)) {
      Ops tf = Ops.create(graph);
      Operand<TFloat32> x = tf.constantOf(value);
      Operand<TFloat32> ours = tf.sum(tf.math.mul(StopGradient.create(tf.scope(), x), x), tf.constant(0));
      Operand<TFloat32> builtin = tf.sum(tf.math.mul(tf.stopGradient(x), x), tf.constant(0));
      try (Result result =
          session
              .runner()
              .fetch(tf.gradients(ours, List.of(x)).dy(0))
              .fetch(tf.gradients(builtin, List.of(x)).dy(0))
              .run()) {
        assertArrayEquals(TestTensors.bytesOf(result.get(1)), TestTensors.bytesOf(result.get(0)));
      }
    }
  }

  /**
   * TensorFlow has no C++ gradient for its own PreventGradient, so through the C API (Java's
   * gradients) the built-in fails with "no gradient" and its message is lost; the plugin's C++
   * gradient fails with INVALID_ARGUMENT and the message, as Python's gradient does.
   */
  @Test
  void preventGradientRefusesWithItsMessage() {
    TensorFlowException builtin =
        assertThrows(
            TensorFlowException.class,
            () ->
                gradientOfWeightedSum(
                    (tf, x) ->
                        tf.train.preventGradient(
                            x, org.tensorflow.op.train.PreventGradient.message("x is sampled"))));
    assertTrue(builtin.getMessage().contains("No gradient defined for op: PreventGradient"), builtin.getMessage());
    TFInvalidArgumentException ours =
        assertThrows(
            TFInvalidArgumentException.class,
            () ->
                gradientOfWeightedSum(
                    (tf, x) -> PreventGradient.create(tf.scope(), x, PreventGradient.message("x is sampled"))));
    assertTrue(
        ours.getMessage().startsWith("Gradient explicitly disabled. Reason: x is sampled (op "
            + PreventGradient.OP_NAME),
        ours.getMessage());
  }
}
