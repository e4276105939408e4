package org.tfstopgrad;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.tensorflow.TensorFlow;

/**
 * Run in a JVM of its own: runs a SavedModel's serving signature without ever loading
 * tf_stopgrad, and writes its softmax and prevented outputs to a file.
 */
public final class RunWithoutPlugin {
  public static void main(String[] args) throws Exception {
    byte[][] outputs = SavedModelTest.run(Paths.get(args[0]), "softmax", "prevented");
    if (TensorFlow.registeredOpList().getOpList().stream().anyMatch(op -> op.getName().startsWith("TfStopgrad>"))) {
      System.out.println("tf_stopgrad's ops are registered");
      System.exit(1);
    }
    Path out = Paths.get(args[1]);
    Files.write(out, outputs[0]);
    Files.write(out, outputs[1], java.nio.file.StandardOpenOption.APPEND);
    System.out.println("ran without tf_stopgrad's ops registered");
  }
}
