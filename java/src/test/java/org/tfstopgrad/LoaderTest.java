package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.tensorflow.TensorFlow;
import org.tensorflow.proto.OpDef;

/** Which op library the loader picks, where it puts it, and how it refuses. */
class LoaderTest {

  /** The supported minors, [first, last + 1), from the one place they are written: the
   * tensorflow requirement of pyproject.toml. */
  static int[] supportedMinors() throws Exception {
    String pyproject = Files.readString(Paths.get(System.getProperty("basedir"), "..", "pyproject.toml"));
    Matcher range = Pattern.compile("\"tensorflow>=2\\.(\\d+),<2\\.(\\d+)\"").matcher(pyproject);
    assertTrue(range.find(), "pyproject.toml names no TensorFlow range");
    return new int[] {Integer.parseInt(range.group(1)), Integer.parseInt(range.group(2))};
  }

  @Test
  void loadsTheLibraryForTheRunningTensorFlowOnce() {
    Path library = TfStopgrad.load();
    String version = TensorFlow.version();
    String minor = version.substring(0, version.indexOf('.', version.indexOf('.') + 1));
    assertEquals("libtf_stopgrad_ops-tf" + minor + ".so", library.getFileName().toString());
    assertTrue(library.startsWith(Paths.get(System.getProperty("org.bytedeco.javacpp.cachedir"))), library.toString());
    assertTrue(Files.isRegularFile(library));
    assertEquals(library, TfStopgrad.load());
  }

  @Test
  void registersBothOpTypesWithTheBuiltInsInterfaces() {
    TfStopgrad.load();
    List<OpDef> ops = TensorFlow.registeredOpList().getOpList();
    OpDef builtin = ops.stream().filter(op -> op.getName().equals("PreventGradient")).findFirst().orElseThrow();
    OpDef ours = ops.stream().filter(op -> op.getName().equals(PreventGradient.OP_NAME)).findFirst().orElseThrow();
    assertEquals(builtin.getInputArgList(), ours.getInputArgList());
    assertEquals(builtin.getOutputArgList(), ours.getOutputArgList());
    assertEquals(builtin.getAttrList(), ours.getAttrList());
    assertTrue(ops.stream().anyMatch(op -> op.getName().equals(StopGradient.OP_NAME)));
  }

  @Test
  void aTensorFlowWithoutALibraryIsRefusedWithTheTestedReleases() throws Exception {
    UnsupportedOperationException refused =
        assertThrows(
            UnsupportedOperationException.class,
            () -> TfStopgrad.libraryResource("linux-x86_64", "2.10.1"));
    int[] range = supportedMinors();
    assertTrue(
        refused.getMessage().matches(
            "tf_stopgrad has op libraries for TensorFlow 2\\." + range[0] + ", .*2\\." + (range[1] - 1)
                + " on linux-x86_64, but this"
                + " TensorFlow Java runs TensorFlow 2\\.10\\.1\\. Use a TensorFlow Java release whose"
                + " TensorFlow is one of those; tested: 1\\.0\\.0 \\(TensorFlow 2\\.16\\), 1\\.1\\.0"
                + " \\(TensorFlow 2\\.18\\) .*"),
        refused.getMessage());
  }

  @Test
  void anotherPlatformIsRefusedWithThePlatformsItHas() {
    String arch = System.getProperty("os.arch");
    System.setProperty("os.arch", "ppc64le");
    try {
      UnsupportedOperationException refused =
          assertThrows(UnsupportedOperationException.class, TfStopgrad::platform);
      assertTrue(
          refused.getMessage().startsWith("tf_stopgrad has op libraries for linux-"),
          refused.getMessage());
      assertTrue(refused.getMessage().contains(" ppc64le. Run it on one of those"), refused.getMessage());
    } finally {
      System.setProperty("os.arch", arch);
    }
  }

  /**
   * Every minor for each architecture Maven was asked for (-Dtf_stopgrad.architectures, as
   * op_libraries.py reads it; host: this JVM's), and for any other the jar holds.
   */
  @Test
  void theJarCarriesEveryMinorForEachArchitectureAskedForAndEachItHolds() throws Exception {
    String listed;
    try (var list = TfStopgrad.class.getResourceAsStream("/org/tfstopgrad/native/op_libraries.txt")) {
      listed = new String(list.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    }
    List<String> lines = listed.lines().collect(Collectors.toList());
    Set<String> platforms = new TreeSet<>();
    for (String asked : System.getProperty("tf_stopgrad.architectures").split(",")) {
      platforms.add(asked.equals("host") ? TfStopgrad.platform() : "linux-" + asked.replace("aarch64", "arm64"));
    }
    lines.forEach(library -> platforms.add(library.substring(0, library.indexOf('/'))));
    int[] range = supportedMinors();
    for (String platform : platforms) {
      for (int minor = range[0]; minor < range[1]; minor++) {
        String library = platform + "/libtf_stopgrad_ops-tf2." + minor + ".so";
        assertTrue(lines.contains(library), library + " not in " + lines);
        assertTrue(TfStopgrad.class.getResource("/org/tfstopgrad/native/" + library) != null, library);
      }
    }
  }
}
