"""The PySpark twin of DriversetPi.java: slices of darts from generators seeded with the slice's
number, so every run prints the same estimate. Arguments: slices, milliseconds each slice sleeps."""
import random
import sys
import time

DARTS = 20000


def slice_hits(i, sleep_ms):
    time.sleep(sleep_ms / 1000.0)
    r = random.Random(i)
    hits = 0
    for _ in range(DARTS):
        x, y = r.random() * 2 - 1, r.random() * 2 - 1
        if x * x + y * y <= 1:
            hits += 1
    return hits


def main():
    # here, so the slices can be computed without Spark
    from pyspark import SparkConf, SparkContext, __version__ as pyspark_version

    slices, sleep_ms = int(sys.argv[1]), int(sys.argv[2])
    sc = SparkContext(conf=SparkConf().setAppName("driverset-pi"))
    print("driverset-pi: app %s attempt started" % sc.applicationId, flush=True)
    # PySpark's Python side and the JVM it drives are released together: say which ran.
    print("driverset-pi: PySpark %s on Spark %s" % (pyspark_version, sc.version), flush=True)
    inside = sc.parallelize(range(slices), slices).map(lambda i: slice_hits(i, sleep_ms)).reduce(lambda a, b: a + b)
    print("driverset-pi: pi is roughly %.6f (%d slices)" % (4.0 * inside / (slices * DARTS), slices), flush=True)
    sc.stop()


if __name__ == "__main__":
    main()
