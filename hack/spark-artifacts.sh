#!/usr/bin/env bash
# Fetches and builds what the real-Spark scenarios run, into a cache folder outside the repo,
# keyed by version, and prints on stdout what it made, one per line:
#   jre <path of jre.tar>
#   spark <version> <Scala version> <path of spark-<version>>
#   pyspark <version> <path of pyspark-<version>/layer.tar>
# Below that folder:
#
#   jre.tar              an image root file system: Debian with OpenJDK 17's JRE, tini and a
#                        spark user (uid 185, as in Spark's images) — built with mmdebstrap
#   spark-<v>-r<recipe>/jars/       Spark <v>'s jars and their dependencies, from Maven Central
#   spark-<v>-r<recipe>/RELEASE     marks the folder as a Spark distribution for Spark's launcher
#   spark-<v>-r<recipe>/layer.tar   an image layer: the jars and RELEASE at /opt/spark
#   pyspark-<v>/layer.tar           an image layer: PySpark's and py4j's Python packages at
#                                   /opt/spark/python (for PYSPARK_VERSIONS only; from PyPI)
#
# The same folders serve spark-submit on the host (SPARK_HOME=spark-<v>-r<recipe>) and the image
# the nodes run. A part that is complete (its .done stamp exists) is reused as is. Cold: about
# a minute for the JRE, 15-20 s per Spark version with an empty Maven repository (230 MB of jars
# for 3.5.6, 300 MB for 4.1.1, held twice: jars/ and layer.tar) and 20-30 s per PySpark version
# (its sdist is 300-450 MB); needs root (mmdebstrap), Maven, PyPI and Debian's mirror.
#
# Environment: DRIVERSET_SPARK_CACHE (default ~/.cache/driverset-spark).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=spark-versions.env
source "$here/spark-versions.env"

cache=${DRIVERSET_SPARK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/driverset-spark}
out="$cache/$(uname -m)"
mkdir -p "$out"

log() { printf '[spark-artifacts %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# One builder at a time: a second caller waits for the first instead of building twice.
exec 9>"$out/.lock"
if ! flock -n 9; then
  log "another build holds $out/.lock; waiting for it"
  flock 9
fi

# The JRE root file system.
jre="$out/$JRE_KEY"
if [[ ! -f "$jre/.done" ]]; then
  command -v mmdebstrap >/dev/null || {
    log "installing mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
  }
  rm -rf "$jre" && mkdir -p "$jre"
  log "building the JRE root file system ($DEBIAN_SUITE: $JRE_PACKAGES)"
  # Documentation and translations are dropped; man pages stay (update-alternatives links them).
  # The spark user and its work dir are what Spark's own images have.
  # shellcheck disable=SC2086
  mmdebstrap --quiet --variant=essential --include="${JRE_PACKAGES// /,}" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='echo "spark:x:185:185:spark:/opt/spark:/bin/false" >>"$1/etc/passwd"' \
    --customize-hook='echo "spark:x:185:" >>"$1/etc/group"' \
    --customize-hook='mkdir -p "$1/opt/spark/work-dir" && chown 185:185 "$1/opt/spark/work-dir"' \
    --customize-hook='rm -rf "$1/var/cache/apt" "$1/var/lib/apt/lists"' \
    "$DEBIAN_SUITE" "$jre/jre.tmp.tar" http://deb.debian.org/debian >&2
  mv "$jre/jre.tmp.tar" "$jre/jre.tar"
  touch "$jre/.done"
fi

for v in $SPARK_VERSIONS; do
  dir="$out/spark-$v-r$SPARK_RECIPE"
  [[ -f "$dir/.done" ]] && continue
  scala_var="SPARK_SCALA_${v//./_}"
  scala=${!scala_var:?"no Scala version for Spark $v in spark-versions.env"}
  extra_var="SPARK_MODULES_${v//./_}"
  read -ra modules <<<"$SPARK_MODULES ${!extra_var:-}"
  deps=
  for m in "${modules[@]}"; do
    deps+="    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-${m}_$scala</artifactId><version>$v</version></dependency>"$'\n'
  done
  rm -rf "$dir" && mkdir -p "$dir/stage/opt/spark/conf"
  log "fetching Spark $v (Scala $scala: ${modules[*]}) from Maven Central"
  cat >"$dir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.driverset.e2e</groupId><artifactId>spark-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.spark</groupId><artifactId>spark-parent_$scala</artifactId><version>$v</version>
        <type>pom</type><scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
$deps
  </dependencies>
</project>
POM
  mvn -q -B -Dstyle.color=never -f "$dir/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$dir/stage/opt/spark/jars" >&2
  printf 'Spark %s (Scala %s), jars from Maven Central, assembled by driverset'"'"'s hack/spark-artifacts.sh\n' "$v" "$scala" \
    >"$dir/stage/opt/spark/RELEASE"
  # The image layer: /opt/spark, owned by root, readable by all.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir/stage" -cf "$dir/layer.tar" opt
  mv "$dir/stage/opt/spark/jars" "$dir/stage/opt/spark/RELEASE" "$dir/"
  rm -rf "$dir/stage" "$dir/pom.xml"
  touch "$dir/.done"
done

for v in $PYSPARK_VERSIONS; do
  dir="$out/pyspark-$v"
  [[ -f "$dir/.done" ]] && continue
  py4j_var="PY4J_${v//./_}"
  py4j=${!py4j_var:?"no py4j version for PySpark $v in spark-versions.env"}
  rm -rf "$dir" && mkdir -p "$dir/dl" "$dir/stage/opt/spark/python"
  log "fetching PySpark $v and py4j $py4j from PyPI"
  pip download --quiet --no-deps --no-binary :all: "pyspark==$v" -d "$dir/dl" >&2
  pip download --quiet --no-deps --only-binary :all: "py4j==$py4j" -d "$dir/dl" >&2
  # Naming the sdist's own py4j source zip makes tar fail unless py4j is the version Spark ships.
  tar -xzf "$dir/dl/pyspark-$v.tar.gz" -C "$dir/dl" "pyspark-$v/pyspark" "pyspark-$v/lib/py4j-$py4j-src.zip" || {
    log "PySpark $v's sdist lacks pyspark/ or lib/py4j-$py4j-src.zip: is $py4j_var the py4j it ships?"
    exit 1
  }
  mv "$dir/dl/pyspark-$v/pyspark" "$dir/stage/opt/spark/python/"
  python3 -m zipfile -e "$dir/dl"/py4j-"$py4j"-*.whl "$dir/dl/py4j"
  mv "$dir/dl/py4j/py4j" "$dir/stage/opt/spark/python/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode=a+rX -C "$dir/stage" -cf "$dir/layer.tar" opt
  rm -rf "$dir/dl" "$dir/stage"
  touch "$dir/.done"
done

echo "jre $jre/jre.tar"
for v in $SPARK_VERSIONS; do
  scala_var="SPARK_SCALA_${v//./_}"
  echo "spark $v ${!scala_var} $out/spark-$v-r$SPARK_RECIPE"
done
for v in $PYSPARK_VERSIONS; do
  echo "pyspark $v $out/pyspark-$v/layer.tar"
done
