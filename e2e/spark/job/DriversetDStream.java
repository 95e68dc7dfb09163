// driverset-job: needs spark-streaming
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.streaming.Durations;
import org.apache.spark.streaming.StreamingContext;
import org.apache.spark.streaming.Time;
import org.apache.spark.streaming.api.java.JavaDStream;
import org.apache.spark.streaming.api.java.JavaStreamingContext;
import org.apache.spark.streaming.dstream.InputDStream;
import scala.Option;
import scala.reflect.ClassTag$;

/**
 * DriversetStream's DStream twin (Spark Streaming, for the versions whose jars have it: 3.5.6),
 * with the same arguments (checkpoint dir, output dir, rows per batch R, batches N, milliseconds
 * per batch — the batch duration —, optionally "fail-once") and lines. A StreamingContext from
 * StreamingContext.getOrCreate on the checkpoint dir: a restarted driver recovers the graph and
 * the batches that were pending, and generates those due while it was down. The input needs no
 * receiver and replays: batch b (its time's number since the stream's zero time) is the values
 * [b·R, (b+1)·R), the first of which sleeps half a batch. Each batch is written as out/batch-b,
 * its values one a line, replacing an earlier attempt at it; batches from N on are not written,
 * and the job stops once batch-(N-1) is there. "resume batch=B" is the first batch this driver
 * writes; with "fail-once", the first driver (no marker next to the checkpoint) throws once
 * batch-((N-1)/2) is written.
 */
public final class DriversetDStream {
  private static final String PREFIX = "driverset-stream: ";
  /** Whether this JVM has written a batch yet (its first is where it resumed). */
  private static final AtomicBoolean WROTE = new AtomicBoolean();

  private DriversetDStream() {}

  public static void main(String[] args) throws Exception {
    String checkpoint = args[0];
    String out = args[1];
    long rows = Long.parseLong(args[2]);
    long batches = Long.parseLong(args[3]);
    long millis = Long.parseLong(args[4]);
    boolean failOnce = args.length > 5 && args[5].equals("fail-once");
    boolean[] created = {false};
    JavaStreamingContext ssc = JavaStreamingContext.getOrCreate(checkpoint, () -> {
      created[0] = true;
      JavaStreamingContext c = new JavaStreamingContext(
          new SparkConf().setAppName("driverset-dstream"), Durations.milliseconds(millis));
      c.checkpoint(checkpoint);
      JavaDStream<Long> values = new JavaDStream<>(new Batches(c.ssc(), rows),
          ClassTag$.MODULE$.apply(Long.class));
      values.map(v -> {
        if (v % rows == 0) {
          Thread.sleep(millis / 2);
        }
        return v;
      }).foreachRDD((rdd, time) -> write(out, rdd, rows, batches));
      return c;
    });
    JavaSparkContext sc = ssc.sparkContext();
    say("app " + sc.sc().applicationId() + " started: dstream, Spark " + sc.version()
        + (created[0] ? ", new checkpoint" : ", recovered from the checkpoint"));
    Path last = Paths.get(out, "batch-" + (batches - 1));
    if (Files.exists(last)) {
      say("resume batch=" + batches);
      say("done batches=" + batches);
      sc.stop();
      return;
    }
    Path failAt = Paths.get(out, "batch-" + (batches - 1) / 2);
    Path marker = Paths.get(checkpoint).toAbsolutePath().resolveSibling(
        Paths.get(checkpoint).getFileName() + ".failed-once");
    ssc.start();
    try {
      while (!Files.exists(last)) {
        if (failOnce && Files.exists(failAt) && !Files.exists(marker)) {
          Files.createFile(marker);
          say("failing once after batch=" + (batches - 1) / 2 + ", as asked");
          throw new IllegalStateException(PREFIX + "failing the first run, as asked");
        }
        if (ssc.awaitTerminationOrTimeout(20)) { // throws a batch's failure
          throw new IllegalStateException(PREFIX + "the streaming context stopped before batch " + (batches - 1));
        }
      }
    } catch (Exception e) {
      // A running StreamingContext's threads keep the JVM alive after main throws (a hung
      // driver, not a failed one): stop it, not gracefully, so that the driver exits non-zero.
      ssc.stop(true, false);
      throw e;
    }
    ssc.stop(true, true);
    say("done batches=" + batches);
  }

  static void say(String line) {
    System.out.println(PREFIX + line);
    System.out.flush();
  }

  /** Writes a batch's values as out/batch-B, atomically, over an earlier attempt's. */
  static void write(String out, JavaRDD<Long> rdd, long rows, long batches) throws IOException {
    List<Long> vs = new ArrayList<>(rdd.collect());
    if (vs.isEmpty()) {
      return;
    }
    Collections.sort(vs);
    long b = vs.get(0) / rows;
    if (b >= batches) {
      return;
    }
    if (WROTE.compareAndSet(false, true)) {
      say("resume batch=" + b);
    }
    StringBuilder s = new StringBuilder();
    for (long v : vs) {
      s.append(v).append('\n');
    }
    Path dir = Paths.get(out);
    Files.createDirectories(dir);
    Path tmp = dir.resolve(".batch-" + b + "." + UUID.randomUUID() + ".tmp");
    Files.write(tmp, s.toString().getBytes(StandardCharsets.UTF_8));
    Files.move(tmp, dir.resolve("batch-" + b), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    say("committed batch=" + b);
  }

  /**
   * The input: batch b, the b-th batch time after the stream's zero time, is [b·R, (b+1)·R) in
   * two partitions; no receiver, and the same again whenever the batch is generated again. The
   * zero time is part of the checkpointed graph.
   */
  static final class Batches extends InputDStream<Long> {
    private static final long serialVersionUID = 1L;
    private final long rows;

    Batches(StreamingContext ssc, long rows) {
      super(ssc, ClassTag$.MODULE$.apply(Long.class));
      this.rows = rows;
    }

    @Override
    public void start() {}

    @Override
    public void stop() {}

    @Override
    public Option<RDD<Long>> compute(Time validTime) {
      long b = (validTime.milliseconds() - zeroTime().milliseconds()) / slideDuration().milliseconds() - 1;
      List<Long> vs = new ArrayList<>();
      for (long v = b * rows; v < (b + 1) * rows; v++) {
        vs.add(v);
      }
      return Option.apply(new JavaSparkContext(context().sparkContext()).parallelize(vs, 2).rdd());
    }
  }
}
