"""The PySpark twin of DriversetStream.java's stateless query: rate-micro-batch (batch b is the
values [b*R, (b+1)*R)) to a text file sink, one value a line. Same arguments: checkpoint dir,
output dir, rows per batch R, batches N, milliseconds per batch, optionally "fail-once"; the same
"driverset-stream: " lines. The first row of each batch sleeps in a Python UDF, so that the
executors' Python workers take part as in the pi job."""
import os
import re
import sys
import time

PREFIX = "driverset-stream: "


def say(line):
    print(PREFIX + line, flush=True)


def resume_batch(checkpoint):
    """The batch a query on checkpoint runs first: the latest offsets/B again unless commits/B
    exists; 0 without offsets (MicroBatchExecution's rule)."""
    try:
        ids = [int(n) for n in os.listdir(os.path.join(checkpoint, "offsets")) if re.fullmatch(r"[0-9]+", n)]
    except FileNotFoundError:
        ids = []
    if not ids:
        return 0
    b = max(ids)
    return b + 1 if os.path.exists(os.path.join(checkpoint, "commits", str(b))) else b


def main():
    # here, so that resume_batch can be used without Spark
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf
    from pyspark.sql.types import LongType

    checkpoint, out = sys.argv[1], sys.argv[2]
    rows, batches, millis = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    fail_once = len(sys.argv) > 6 and sys.argv[6] == "fail-once"
    spark = (SparkSession.builder.appName("driverset-stream")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    say("app %s started: python stateless query, Spark %s" % (spark.sparkContext.applicationId, spark.version))
    nxt = resume_batch(checkpoint)
    say("resume batch=%d" % nxt)
    if nxt >= batches:
        # Killed after the last commit: starting the query would run batch N.
        say("done batches=%d" % batches)
        spark.stop()
        return

    def slow(v):
        if v % rows == 0:
            time.sleep(millis / 2000.0)
        return v

    values = (spark.readStream.format("rate-micro-batch")
              .option("rowsPerBatch", rows).option("numPartitions", 2).load()
              # A batch slower than the trigger lets batch N start before the stop: it gets no rows.
              .where("value < %d" % (rows * batches))
              .select(udf(slow, LongType())("value").alias("value")))
    query = (values.selectExpr("CAST(value AS STRING) AS value").writeStream.format("text")
             .option("checkpointLocation", checkpoint).option("path", out)
             .trigger(processingTime="%d milliseconds" % millis).start())

    fail_at = (batches - 1) // 2
    ckpt = os.path.abspath(checkpoint).rstrip("/")
    marker = ckpt + ".failed-once"
    # The commit log says when a batch is done (DriversetStream.java says why).
    while nxt < batches:
        # First: a query that failed fails the job even when another driver commits every batch.
        if not query.isActive:
            query.awaitTermination()  # raises the query's failure
            raise RuntimeError(PREFIX + "the query stopped before batch %d" % nxt)
        if os.path.exists(os.path.join(checkpoint, "commits", str(nxt))):
            say("committed batch=%d" % nxt)
            if fail_once and nxt >= fail_at and not os.path.exists(marker):
                open(marker, "x").close()
                say("failing once after batch=%d, as asked" % nxt)
                raise RuntimeError(PREFIX + "failing the first run after batch %d, as asked" % nxt)
            nxt += 1
            continue
        time.sleep(0.02)
    for _ in range(500):
        p = query.lastProgress
        if not query.isActive or p is not None and p["batchId"] >= batches - 1:
            break
        time.sleep(0.02)
    if not query.isActive:
        query.awaitTermination()
    query.stop()
    say("done batches=%d" % batches)
    spark.stop()


if __name__ == "__main__":
    main()
