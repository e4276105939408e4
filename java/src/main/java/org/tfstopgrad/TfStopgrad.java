package org.tfstopgrad;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
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
    String platform = null;
    if (os.startsWith("linux")) {
      if (arch.equals("amd64") || arch.equals("x86_64")) {
        platform = "linux-x86_64";
      } else if (arch.equals("aarch64") || arch.equals("arm64")) {
        platform = "linux-arm64";
      }
    }
    if (platform == null || !platformsInJar().contains(platform)) {
      throw new UnsupportedOperationException(
          "tf_stopgrad has op libraries for "
              + String.join(" and ", platformsInJar())
              + ", but this JVM runs on "
              + System.getProperty("os.name")
              + " "
              + System.getProperty("os.arch")
              + ". Run it on one of those, for example in a Linux container.");
    }
    return platform;
  }

  /** The jar's resource name of the op library for {@code platform} and TensorFlow {@code version}. */
  static String libraryResource(String platform, String tensorflowVersion) {
    String minor = minorOf(tensorflowVersion);
    String resource = platform + "/libtf_stopgrad_ops-tf" + minor + ".so";
    List<String> libraries = librariesInJar();
    if (!libraries.contains(resource)) {
      List<String> minors = new ArrayList<>();
      for (String library : libraries) {
        if (library.startsWith(platform + "/")) {
          minors.add(minorOf(library.substring(library.lastIndexOf("-tf") + 3)));
        }
      }
      throw new UnsupportedOperationException(
          "tf_stopgrad has op libraries for TensorFlow "
              + String.join(", ", minors)
              + " on "
              + platform
              + ", but this TensorFlow Java runs TensorFlow "
              + tensorflowVersion
              + ". Use a TensorFlow Java release whose TensorFlow is one of those; tested: "
              + testedReleases()
              + " (org.tensorflow:tensorflow-core-api and tensorflow-core-native).");
    }
    return resource;
  }

  private static String testedReleases() {
    StringBuilder text = new StringBuilder();
    new TreeMap<>(TESTED_TENSORFLOW_JAVA_RELEASES)
        .forEach(
            (release, tensorflow) -> {
              if (text.length() > 0) {
                text.append(", ");
              }
              text.append(release).append(" (TensorFlow ").append(tensorflow).append(')');
            });
    return text.toString();
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
      List<String> libraries = new ArrayList<>();
      for (String line : new String(list.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
        if (!line.isBlank()) {
          libraries.add(line.strip());
        }
      }
      return libraries;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read tf_stopgrad's list of op libraries", e);
    }
  }

  private static List<String> platformsInJar() {
    List<String> platforms = new ArrayList<>();
    for (String library : librariesInJar()) {
      String platform = library.substring(0, library.indexOf('/'));
      if (!platforms.contains(platform)) {
        platforms.add(platform);
      }
    }
    return platforms;
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
          "cannot extract tf_stopgrad's op library "
              + resource
              + " under "
              + root
              + "; make that directory writable, or set -Dorg.bytedeco.javacpp.cachedir to one"
              + " that is",
          e);
    }
  }

  private static String sha256(byte[] bytes) {
    try {
      StringBuilder hex = new StringBuilder();
      for (byte b : MessageDigest.getInstance("SHA-256").digest(bytes)) {
        hex.append(String.format("%02x", b));
      }
      return hex.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }
}
