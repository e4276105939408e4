package org.tfstopgrad;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.tensorflow.EagerSession;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.op.Ops;
import org.tensorflow.types.TFloat32;

/** Several threads build and run graphs and eager ops with the plugin at once. */
class ThreadsTest {
  private static final int THREADS = 8;
  private static final int ROUNDS = 25;

  private static void graphRound(Random random) {
    try (Graph graph = new Graph();
        Session session = new Session(graph);
        TFloat32 input = TestTensors.random(TFloat32.class, Shape.of(64, 16), random)) {
      Ops tf = Ops.create(graph);
      Operand<TFloat32> x = tf.constantOf(input);
      try (Result result =
          session
              .runner()
              .fetch(tf.math.add(StopGradient.create(tf.scope(), x), PreventGradient.create(tf.scope(), x)))
              .fetch(tf.math.add(tf.stopGradient(x), tf.train.preventGradient(x)))
              .run()) {
        TestTensors.assertBitIdentical(result.get(1), result.get(0));
      }
    }
  }

  private static void eagerRound(Random random) {
    try (EagerSession eager = EagerSession.create();
        TFloat32 input = TestTensors.random(TFloat32.class, Shape.of(64, 16), random)) {
      Ops tf = Ops.create(eager);
      TestTensors.assertBitIdentical(input, StopGradient.create(tf.scope(), tf.constantOf(input)).asTensor());
    }
  }

  @Test
  void threadsBuildAndRunGraphsAndEagerOpsAtOnce() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    try {
      List<Future<Integer>> rounds = new ArrayList<>();
      for (int thread = 0; thread < THREADS; thread++) {
        Random random = new Random(thread);
        rounds.add(
            pool.submit(
                () -> {
                  for (int round = 0; round < ROUNDS; round++) {
                    graphRound(random);
                    eagerRound(random);
                  }
                  return ROUNDS;
                }));
      }
      for (Future<Integer> done : rounds) {
        assertEquals(ROUNDS, done.get(5, TimeUnit.MINUTES));
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void firstUseFromManyThreadsInAFreshJvmLoadsOnce() throws Exception {
    JavaProcess.Outcome outcome = JavaProcess.run(ConcurrentFirstUse.class);
    assertEquals(0, outcome.exitCode, outcome.output);
    assertEquals("1 library, " + THREADS + " graphs ok", outcome.lastLine());
  }
}
