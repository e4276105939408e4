package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Result;
import org.tensorflow.SavedModelBundle;
import org.tensorflow.Tensor;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.types.TFloat32;

/**
 * SavedModels saved by Python (src/test/python/save_models.py, run with -Dtf_stopgrad.python):
 * the one with the plugin's ops runs here bit for bit as it ran in Python, and its
 * tf_stopgrad.export copy runs in a JVM that never loads the plugin.
 */
@Tag("python")
class SavedModelTest {
  @TempDir static Path models;

  @BeforeAll
  static void saveModelsFromPython() throws IOException, InterruptedException {
    String python = System.getProperty("tf_stopgrad.python");
    Path script = Paths.get(System.getProperty("basedir"), "src", "test", "python", "save_models.py");
    Path log = models.resolve("python.log");
    Process process =
        new ProcessBuilder(python, script.toString(), models.toString())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
    assertTrue(process.waitFor(5, TimeUnit.MINUTES), "save_models.py did not finish in 5 minutes");
    assertEquals(0, process.exitValue(), () -> python + " save_models.py failed:\n" + read(log));
  }

  private static String read(Path path) {
    try {
      return Files.readString(path, StandardCharsets.ISO_8859_1);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** The signature's outputs for Python's input, as raw float32 bytes, in {@code names}' order. */
  static byte[][] run(Path savedModel, String... names) throws IOException {
    byte[] x = Files.readAllBytes(savedModel.getParent().resolve("x.bin"));
    try (SavedModelBundle bundle = SavedModelBundle.load(savedModel.toString(), "serve");
        TFloat32 input =
            Tensor.of(TFloat32.class, Shape.of(3, 4), tensor -> tensor.asRawTensor().data().write(x));
        Result result = bundle.function("serving_default").call(Map.of("x", input))) {
      byte[][] outputs = new byte[names.length][];
      for (int i = 0; i < names.length; i++) {
        outputs[i] = TestTensors.bytesOf(result.get(names[i]).orElseThrow());
      }
      return outputs;
    }
  }

  @Test
  void pythonsSavedModelWithThePluginRunsBitIdentical() throws IOException {
    assertTrue(read(models.resolve("plugin/saved_model.pb")).contains(StopGradient.OP_NAME));
    TfStopgrad.load();
    byte[][] outputs = run(models.resolve("plugin"), "softmax", "prevented");
    assertArrayEquals(Files.readAllBytes(models.resolve("softmax.bin")), outputs[0]);
    assertArrayEquals(Files.readAllBytes(models.resolve("prevented.bin")), outputs[1]);
  }

  @Test
  void theExportedCopyRunsWithoutThePlugin() throws Exception {
    assertFalse(read(models.resolve("export/saved_model.pb")).contains("TfStopgrad>"));
    Path outputs = models.resolve("export-outputs.bin");
    JavaProcess.Outcome outcome =
        JavaProcess.run(RunWithoutPlugin.class, models.resolve("export").toString(), outputs.toString());
    assertEquals(0, outcome.exitCode, outcome.output);
    assertEquals("ran without tf_stopgrad's ops registered", outcome.lastLine());
    byte[] expected = Files.readAllBytes(models.resolve("softmax.bin"));
    byte[] prevented = Files.readAllBytes(models.resolve("prevented.bin"));
    byte[] both = new byte[expected.length + prevented.length];
    System.arraycopy(expected, 0, both, 0, expected.length);
    System.arraycopy(prevented, 0, both, expected.length, prevented.length);
    assertArrayEquals(both, Files.readAllBytes(outputs));
  }
}
