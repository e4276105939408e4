package org.tfstopgrad;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs a main class in a JVM of its own, with this JVM's class path and cache directory. */
final class JavaProcess {
  static final class Outcome {
    final int exitCode;
    final String output;

    Outcome(int exitCode, String output) {
      this.exitCode = exitCode;
      this.output = output;
    }

    String lastLine() {
      String[] lines = output.strip().split("\n");
      return lines[lines.length - 1];
    }
  }

  private JavaProcess() {}

  static Outcome run(Class<?> mainClass, String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(ProcessHandle.current().info().command().orElse("java"));
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add("-Dorg.bytedeco.javacpp.cachedir=" + System.getProperty("org.bytedeco.javacpp.cachedir", ""));
    command.add(mainClass.getName());
    command.addAll(List.of(args));
    Path log = Files.createTempFile(mainClass.getSimpleName(), ".log");
    try {
      Process process =
          new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
      if (!process.waitFor(5, TimeUnit.MINUTES)) {
        process.destroyForcibly();
        throw new AssertionError(mainClass.getSimpleName() + " did not finish in 5 minutes");
      }
      return new Outcome(process.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
    } finally {
      Files.deleteIfExists(log);
    }
  }
}
