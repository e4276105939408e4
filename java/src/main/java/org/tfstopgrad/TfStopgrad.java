package org.tfstopgrad;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.tensorflow.TensorFlow;

/**
 * Loads tf_stopgrad's op library into the running TensorFlow Java, once per process.
 *
 * <p>{@link StopGradient#create} and {@link PreventGradient#create} call {@link #load()} before
 * they build an op, so a program that builds its ops with them never calls it. Call it yourself
 * before you import a graph or load a SavedModel that holds the plugin's ops.
 *
 * <p>The jar carries one op library per TensorFlow minor release and platform, built from the
 * same sources as the Python wheels. {@link #load()} picks the one for the TensorFlow that
 * {@link TensorFlow#version()} reports, extracts it to JavaCPP's cache directory (the system
 * property {@code org.bytedeco.javacpp.cachedir}, by default {@code ~/.javacpp/cache}) and loads
 * it with {@link TensorFlow#loadLibrary(String)}.
 */
public final class TfStopgrad {

  /** The TensorFlow Java releases this plugin is tested on, and the TensorFlow each ships. */
  public static final Map<String, String> TESTED_TENSORFLOW_JAVA_RELEASES =
      Map.of("1.0.0", "2.16", "1.1.0", "2.18");

  private static final String RESOURCE_DIR = "/org/tfstopgrad/native/";

  /** JavaCPP's platform names, by the {@code os.arch} of a Linux JVM. */
  private static final Map<String, String> LINUX_PLATFORMS =
      Map.of(
          "amd64", "linux-x86_64", "x86_64", "linux-x86_64",
          "aarch64", "linux-arm64", "arm64", "linux-arm64");

  private static Path loadedLibrary;

  private TfStopgrad() {}

  /**
   * Loads the op library for the running TensorFlow, if no call has loaded it yet. Safe to call
   * from any thread, any number of times.
   *
   * @return the op library's file
   * @throws UnsupportedOperationException if the jar has no op library for this platform or for
   *     the running TensorFlow's minor release; the message says which are supported
   * @throws UncheckedIOException if the library cannot be extracted to the cache directory
   */
  public static synchronized Path load() {
    if (loadedLibrary == null) {
      Path library = extract(libraryResource(platform(), TensorFlow.version()));
      TensorFlow.loadLibrary(library.toString());
      loadedLibrary = library;
    }
    return loadedLibrary;
  }

  /** JavaCPP's name for this JVM's platform, e.g. {@code linux-x86_64}. */
  static String platform() {
    String os = System.getProperty("os.name").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch").toLowerCase(Locale.ROOT);
    String platform = os.startsWith("linux") ? LINUX_PLATFORMS.get(arch) : null;
    if (platform == null || !platformsInJar().contains(platform)) {
      throw new UnsupportedOperationException(
          String.format(
              "tf_stopgrad has op libraries for %s, but this JVM runs on %s %s. Run it on one of"
                  + " those, for example in a Linux container.",
              String.join(" and ", platformsInJar()),
              System.getProperty("os.name"),
              System.getProperty("os.arch")));
    }
    return platform;
  }

  /** The jar's resource name of the op library for {@code platform} and TensorFlow {@code version}. */
  static String libraryResource(String platform, String tensorflowVersion) {
    String resource = platform + "/libtf_stopgrad_ops-tf" + minorOf(tensorflowVersion) + ".so";
    List<String> libraries = librariesInJar();
    if (!libraries.contains(resource)) {
      String minors =
          libraries.stream()
              .filter(library -> library.startsWith(platform + "/"))
              .map(library -> minorOf(library.substring(library.lastIndexOf("-tf") + 3)))
              .collect(Collectors.joining(", "));
      String tested =
          new TreeMap<>(TESTED_TENSORFLOW_JAVA_RELEASES)
              .entrySet().stream()
              .map(release -> release.getKey() + " (TensorFlow " + release.getValue() + ")")
              .collect(Collectors.joining(", "));
      throw new UnsupportedOperationException(
          String.format(
              "tf_stopgrad has op libraries for TensorFlow %s on %s, but this TensorFlow Java runs"
                  + " TensorFlow %s. Use a TensorFlow Java release whose TensorFlow is one of"
                  + " those; tested: %s (org.tensorflow:tensorflow-core-api and"
                  + " tensorflow-core-native).",
              minors, platform, tensorflowVersion, tested));
    }
    return resource;
  }

  /** {@code 2.18} for {@code 2.18.0}, {@code 2.18.0-rc1} or {@code 2.18.so}. */
  private static String minorOf(String version) {
    String[] parts = version.split("\\.");
    return parts.length < 2 ? version : parts[0] + "." + parts[1];
  }

  /** The jar's op libraries, as {@code linux-x86_64/libtf_stopgrad_ops-tf2.18.so}. */
  private static List<String> librariesInJar() {
    try (InputStream list = TfStopgrad.class.getResourceAsStream(RESOURCE_DIR + "op_libraries.txt")) {
      if (list == null) {
        throw new IllegalStateException(
            "this tf_stopgrad jar holds no op library: it was built without the wheels'"
                + " libraries (see BUILD_NOTES.md, \"Java\")");
      }
      return new String(list.readAllBytes(), StandardCharsets.UTF_8)
          .lines()
          .filter(line -> !line.isBlank())
          .map(String::strip)
          .collect(Collectors.toList());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read tf_stopgrad's list of op libraries", e);
    }
  }

  private static List<String> platformsInJar() {
    return librariesInJar().stream()
        .map(library -> library.substring(0, library.indexOf('/')))
        .distinct()
        .collect(Collectors.toList());
  }

  /**
   * Copies the resource to the cache directory, under a name holding its SHA-256, unless it is
   * there. The copy is written beside its final name and moved into place, so no process sees
   * half a library, and jars of other versions never share a file.
   */
  private static Path extract(String resource) {
    String cacheDir = System.getProperty("org.bytedeco.javacpp.cachedir");
    Path root =
        cacheDir != null && !cacheDir.isEmpty()
            ? Paths.get(cacheDir)
            : Paths.get(System.getProperty("user.home"), ".javacpp", "cache");
    try (InputStream in = TfStopgrad.class.getResourceAsStream(RESOURCE_DIR + resource)) {
      byte[] bytes = in.readAllBytes();
      Path target = root.resolve("tf-stopgrad").resolve(sha256(bytes)).resolve(resource);
      if (Files.isRegularFile(target)) {
        return target;
      }
      Files.createDirectories(target.getParent());
      Path partial =
          Files.createTempFile(target.getParent(), target.getFileName().toString(), ".part");
      try {
        Files.write(partial, bytes);
        Files.move(partial, target, StandardCopyOption.ATOMIC_MOVE);
      } finally {
        Files.deleteIfExists(partial);
      }
      return target;
    } catch (IOException e) {
      throw new UncheckedIOException(
          String.format(
              "cannot extract tf_stopgrad's op library %s under %s; make that directory writable,"
                  + " or set -Dorg.bytedeco.javacpp.cachedir to one that is",
              resource, root),
          e);
    }
  }

  private static String sha256(byte[] bytes) {
    try {
      return String.format(
          "%064x", new BigInteger(1, MessageDigest.getInstance("SHA-256").digest(bytes)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }
}
