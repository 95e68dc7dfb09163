import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.ConfigMapBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * The real-Spark scenarios' job, like Spark's SparkPi but with a result that is the same on
 * every run: each slice throws its darts from a random generator seeded with the slice's number,
 * so a run with driverset and one without must print the same estimate.
 *
 * <p>Arguments: slices, milliseconds each slice also sleeps (so that the job lasts long enough
 * to lose a node in the middle of it), and optionally "fail-once": the first driver that gets
 * this far records it in a ConfigMap of its namespace (with the driver's own ServiceAccount,
 * through the Kubernetes client that Spark ships) and throws, as a job with a bug that a retry
 * gets past would; a later driver finds the record and runs the job. And optionally
 * "keep-app-id": the first driver records its app id in a ConfigMap of its namespace, and a later
 * driver sets spark.app.id to it before its SparkContext starts, as a DStream app's
 * StreamingContext.getOrCreate does with the id its checkpoint holds: every incarnation then runs
 * with the first one's id, whatever driverset gives it.
 */
public final class DriversetPi {
  private static final int DARTS = 200_000;

  private DriversetPi() {}

  public static void main(String[] args) throws Exception {
    int slices = Integer.parseInt(args[0]);
    long sleepMillis = Long.parseLong(args[1]);
    Set<String> options = Set.copyOf(Arrays.asList(args).subList(Math.min(2, args.length), args.length));
    SparkConf conf = new SparkConf().setAppName("driverset-pi");
    String kept = options.contains("keep-app-id") ? record("driverset-pi-app-id", null) : null;
    if (kept != null) {
      conf.set("spark.app.id", kept);
    }
    JavaSparkContext sc = new JavaSparkContext(conf);
    if (options.contains("keep-app-id") && kept == null) {
      record("driverset-pi-app-id", sc.sc().applicationId());
    }
    System.out.println("driverset-pi: app " + sc.sc().applicationId() + " attempt started");
    if (options.contains("fail-once") && firstAttempt()) {
      throw new IllegalStateException("driverset-pi: failing the first attempt, as asked");
    }
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < slices; i++) {
      ids.add(i);
    }
    long inside = sc.parallelize(ids, slices).map(i -> {
      Thread.sleep(sleepMillis);
      SplittableRandom r = new SplittableRandom(i);
      long hits = 0;
      for (int d = 0; d < DARTS; d++) {
        double x = r.nextDouble() * 2 - 1;
        double y = r.nextDouble() * 2 - 1;
        if (x * x + y * y <= 1) {
          hits++;
        }
      }
      return hits;
    }).reduce(Long::sum);
    System.out.printf("driverset-pi: pi is roughly %.6f (%d slices)%n", 4.0 * inside / ((long) slices * DARTS), slices);
    sc.stop();
  }

  /**
   * Records the first attempt in its namespace (one app per namespace) in a ConfigMap; false when an
   * earlier attempt did. Not by app id: each incarnation that driverset runs has one of its own.
   */
  private static boolean firstAttempt() throws Exception {
    return record("driverset-pi-attempts", "1") == null;
  }

  /**
   * The value the ConfigMap name of the driver's namespace holds (its key "value"), or null when
   * there is none; then, when value is not null, the ConfigMap is made with it.
   */
  private static String record(String name, String value) throws Exception {
    String ns = new String(Files.readAllBytes(
        Paths.get("/var/run/secrets/kubernetes.io/serviceaccount/namespace"))).trim();
    try (KubernetesClient k8s = new KubernetesClientBuilder().build()) {
      ConfigMap cm = k8s.configMaps().inNamespace(ns).withName(name).get();
      if (cm != null) {
        return cm.getData().get("value");
      }
      if (value != null) {
        k8s.configMaps().inNamespace(ns).resource(new ConfigMapBuilder()
            .withNewMetadata().withName(name).endMetadata()
            .addToData("value", value).build()).create();
      }
      return null;
    }
  }
}
