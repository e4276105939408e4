package org.tfstopgrad;

import org.tensorflow.Operand;
import org.tensorflow.Operation;
import org.tensorflow.OperationBuilder;
import org.tensorflow.Output;
import org.tensorflow.op.RawOp;
import org.tensorflow.op.Scope;
import org.tensorflow.types.family.TType;

/**
 * Passes its input through unchanged, and makes any request for a gradient through it an error
 * that carries its message.
 *
 * <p>tf_stopgrad's counterpart of {@code org.tensorflow.op.train.PreventGradient}. Put it where
 * a gradient would be silently wrong: {@code Graph.addGradients} then fails with an {@code
 * org.tensorflow.exceptions.TFInvalidArgumentException} whose message starts with the built-in's
 * wording and names this op.
 *
 * <pre>{@code
 * Operand<TFloat32> guarded =
 *     PreventGradient.create(tf.scope(), x, PreventGradient.message("x comes from a sampler"));
 * }</pre>
 *
 * @param <T> the data type of the input and output
 */
public final class PreventGradient<T extends TType> extends RawOp implements Operand<T> {

  /** The op type this class builds, as registered by tf_stopgrad's op library. */
  public static final String OP_NAME = "TfStopgrad>PreventGradient";

  private final Output<T> output;

  /**
   * Wraps an existing operation of type {@link #OP_NAME}, e.g. one found in an imported graph.
   *
   * @param operation the operation
   * @throws IllegalArgumentException if the operation has another type
   */
  public PreventGradient(Operation operation) {
    super(operation, OP_NAME);
    output = operation.output(0);
  }

  /**
   * Adds the op to {@code scope}'s graph, or runs it in an eager session. Loads the op library
   * first if no call has loaded it ({@link TfStopgrad#load()}).
   *
   * @param scope the scope to build in
   * @param input the value to pass through
   * @param options {@link #message(String)}, the text of the error a gradient request raises
   * @param <T> the data type of the input and output
   * @return the new op
   */
  public static <T extends TType> PreventGradient<T> create(
      Scope scope, Operand<T> input, Options... options) {
    TfStopgrad.load();
    OperationBuilder builder = scope.opBuilder(OP_NAME, "PreventGradient");
    builder.addInput(input.asOutput());
    if (options != null) {
      for (Options option : options) {
        if (option.message != null) {
          builder.setAttr("message", option.message);
        }
      }
    }
    return new PreventGradient<>(builder.build());
  }

  /**
   * The message of the error that a gradient through this op raises.
   *
   * @param message the message
   * @return an option for {@link #create(Scope, Operand, Options...)}
   */
  public static Options message(String message) {
    return new Options().message(message);
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

  /** Optional attributes of {@link PreventGradient}. */
  public static final class Options {
    private String message;

    private Options() {}

    /**
     * The message of the error that a gradient through the op raises.
     *
     * @param message the message
     * @return this
     */
    public Options message(String message) {
      this.message = message;
      return this;
    }
  }
}
