package org.tfstopgrad;

import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CyclicBarrier;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.op.Ops;
import org.tensorflow.types.TFloat32;

/** Run in a JVM of its own: eight threads build the plugin's first op at the same moment. */
public final class ConcurrentFirstUse {
  public static void main(String[] args) throws Exception {
    int threads = 8;
    CyclicBarrier start = new CyclicBarrier(threads);
    Set<Path> libraries = ConcurrentHashMap.newKeySet();
    Set<String> failures = ConcurrentHashMap.newKeySet();
    Thread[] workers = new Thread[threads];
    for (int i = 0; i < threads; i++) {
      workers[i] =
          new Thread(
              () -> {
                try (Graph graph = new Graph(); Session session = new Session(graph)) {
                  Ops tf = Ops.create(graph);
                  start.await();
                  StopGradient<TFloat32> stopped = StopGradient.create(tf.scope(), tf.constant(2.5f));
                  libraries.add(TfStopgrad.load());
                  try (Result result = session.runner().fetch(stopped).run()) {
                    if (((TFloat32) result.get(0)).getFloat() != 2.5f) {
                      failures.add("wrong value");
                    }
                  }
                } catch (Exception e) {
                  failures.add(e.toString());
                }
              });
      workers[i].start();
    }
    for (Thread worker : workers) {
      worker.join();
    }
    if (!failures.isEmpty()) {
      System.out.println("failures: " + failures);
      System.exit(1);
    }
    System.out.println(libraries.size() + " library, " + threads + " graphs ok");
  }
}
