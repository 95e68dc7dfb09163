#!/bin/bash
# The Spark image's entrypoint, written for driverset's tests from the contract that Spark's own
# image entrypoint (resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh)
# keeps with the pods that spark-submit and the driver create:
#   driver ARGS...   spark-submit in client mode inside the pod, bound to the pod's address
#   executor         the executor backend, configured by the SPARK_* environment of its pod
# Anything else runs as given. Each runs under tini, as in Spark's image.
set -euo pipefail

export SPARK_HOME=${SPARK_HOME:-/opt/spark}
conf=${SPARK_CONF_DIR:-$SPARK_HOME/conf}
classpath="$conf:$SPARK_HOME/jars/*${SPARK_CLASSPATH:+:$SPARK_CLASSPATH}"

case "${1:-}" in
driver)
  shift
  # What bin/spark-submit and bin/spark-class do: Spark's launcher builds the JVM's command line
  # (the heap from spark.driver.memory, the module options Java 17 needs). It prints messages,
  # then a line holding only NUL, then the command's words each ended by NUL; the loop appends
  # the launcher's exit code as one more word. (bash's read drops the NUL: the flag line reads
  # as an empty line.)
  cmd=()
  delim=$'\n'
  started=false
  while IFS= read -r -d "$delim" word; do
    if $started; then
      cmd+=("$word")
    elif [[ -z $word ]]; then
      started=true
      delim=''
    else
      echo "$word"
    fi
  done < <(set +e
    java -Xmx128m -cp "$SPARK_HOME/jars/*" org.apache.spark.launcher.Main \
    org.apache.spark.deploy.SparkSubmit \
    --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-}" \
    --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS:-}" \
    --deploy-mode client "$@"
    printf '%d\0' $?)
  if [[ ${#cmd[@]} -eq 0 ]]; then
    echo "entrypoint: Spark's launcher printed no command" >&2
    exit 1
  fi
  code=${cmd[${#cmd[@]}-1]}
  unset 'cmd[${#cmd[@]}-1]'
  if [[ $code != 0 || ${#cmd[@]} -eq 0 ]]; then
    exit "${code/#0/1}"
  fi
  exec /usr/bin/tini -s -- "${cmd[@]}"
  ;;
executor)
  shift
  # The executor's JVM options come as SPARK_JAVA_OPT_<n>, in order.
  opts=()
  while IFS= read -r opt; do
    [[ -n $opt ]] && opts+=("$opt")
  done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
  exec /usr/bin/tini -s -- java "${opts[@]}" \
    -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
    -cp "$classpath" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" \
    --executor-id "$SPARK_EXECUTOR_ID" \
    --cores "$SPARK_EXECUTOR_CORES" \
    --app-id "$SPARK_APPLICATION_ID" \
    --hostname "$SPARK_EXECUTOR_POD_IP" \
    --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
    --podName "$SPARK_EXECUTOR_POD_NAME"
  ;;
*)
  exec /usr/bin/tini -s -- "$@"
  ;;
esac
