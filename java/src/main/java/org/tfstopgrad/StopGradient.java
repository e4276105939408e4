package org.tfstopgrad;

import org.tensorflow.Operand;
import org.tensorflow.Operation;
import org.tensorflow.Output;
import org.tensorflow.op.RawOp;
import org.tensorflow.op.Scope;
import org.tensorflow.types.family.TType;

/**
 * Passes its input through unchanged and hides it from gradient computation: whatever reaches
 * the input does not receive a gradient through this op, as if the value were a constant.
 *
 * <p>tf_stopgrad's counterpart of {@code org.tensorflow.op.core.StopGradient}, with the same
 * forward values and the same (absent) gradient. Uses:
 *
 * <ul>
 *   <li>a numerically stable softmax, which subtracts the maximum of its input without
 *       differentiating through that maximum;
 *   <li>expectation-maximization, whose M-step must treat the E-step's result as fixed;
 *   <li>contrastive divergence, where the samples drawn from the model are data, not a path for
 *       gradients;
 *   <li>adversarial training, where the perturbed example is an input, not something to
 *       differentiate through.
 * </ul>
 *
 * <pre>{@code
 * Ops tf = Ops.create(graph);
 * Operand<TFloat32> shifted = tf.math.sub(x, StopGradient.create(tf.scope(), tf.max(x, axis)));
 * }</pre>
 *
 * @param <T> the data type of the input and output
 */
public final class StopGradient<T extends TType> extends RawOp implements Operand<T> {

  /** The op type this class builds, as registered by tf_stopgrad's op library. */
  public static final String OP_NAME = "TfStopgrad>StopGradient";

  private final Output<T> output;

  /**
   * Wraps an existing operation of type {@link #OP_NAME}, e.g. one found in an imported graph.
   *
   * @param operation the operation
   * @throws IllegalArgumentException if the operation has another type
   */
  public StopGradient(Operation operation) {
    super(operation, OP_NAME);
    output = operation.output(0);
  }

  /**
   * Adds the op to {@code scope}'s graph, or runs it in an eager session. Loads the op library
   * first if no call has loaded it ({@link TfStopgrad#load()}).
   *
   * @param scope the scope to build in
   * @param input the value to pass through
   * @param <T> the data type of the input and output
   * @return the new op
   */
  public static <T extends TType> StopGradient<T> create(Scope scope, Operand<T> input) {
    TfStopgrad.load();
    return new StopGradient<>(
        scope.opBuilder(OP_NAME, "StopGradient").addInput(input.asOutput()).build());
  }

  /**
   * The op's output: its input, unchanged.
   *
   * @return the output
   */
  public Output<T> output() {
    return output;
  }

  @Override
  public Output<T> asOutput() {
    return output;
  }
}
