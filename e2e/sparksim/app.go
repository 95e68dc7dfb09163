package sparksim

import (
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Defaults of an App, as spark-submit would get them from a typical `spark-submit --deploy-mode
// cluster` of the SparkPi example.
const (
	DefaultMainClass = "org.apache.spark.examples.SparkPi"
	DefaultResource  = "local:///opt/spark/examples/jars/spark-examples.jar"
	// DefaultMaster is the spark.master recorded in spark.properties when Conf does not set one.
	DefaultMaster = "k8s://https://kubernetes.default.svc:443"
	// DefaultUser is SPARK_USER, the submitting user's name (Utils.getCurrentUserName).
	DefaultUser = "spark"
	// DefaultExecutorInstances is Spark's default spark.executor.instances.
	DefaultExecutorInstances = 2
	// PythonRunner is the main class SparkSubmit gives a PySpark app.
	PythonRunner = "org.apache.spark.deploy.PythonRunner"
	// RRunner is the main class SparkSubmit gives a SparkR app.
	RRunner = "org.apache.spark.deploy.RRunner"
)

// App is one `spark-submit --deploy-mode cluster` invocation: every field is a setting the user
// passes (as --conf or a spark-submit flag). Zero values take Spark's defaults.
type App struct {
	Version   Version
	Name      string // spark.app.name, e.g. "spark-pi"
	Namespace string // spark.kubernetes.namespace
	Image     string // spark.kubernetes.container.image; default "apache/spark:<version>"
	MainClass string // default DefaultMainClass
	Resource  string // default DefaultResource
	// PyFile makes a PySpark app: spark-submit's primary resource is this .py file, and its main
	// class is PythonRunner (MainClass and Resource are not used).
	PyFile string
	// RFile makes a SparkR app the same way, with RRunner; at most one of PyFile and RFile is set.
	RFile   string
	AppArgs []string

	DriverLabels      map[string]string // spark.kubernetes.driver.label.*
	DriverAnnotations map[string]string // spark.kubernetes.driver.annotation.*
	ExecutorLabels    map[string]string // spark.kubernetes.executor.label.*
	DriverPodName     string            // spark.kubernetes.driver.pod.name; default "<prefix>-driver"
	ServiceAccount    string            // spark.kubernetes.authenticate.driver.serviceAccountName
	ProxyUser         string            // --proxy-user (3.x+ puts it in the driver's args)
	User              string            // SPARK_USER; default DefaultUser

	DriverCores     string // spark.driver.cores; default "1"
	DriverMemoryMiB int    // spark.driver.memory; default 1024 (plus Spark's overhead in the pod)
	DriverCoreLimit string // spark.kubernetes.driver.limit.cores; default none

	ExecutorInstances int    // spark.executor.instances; default DefaultExecutorInstances
	ExecutorMemoryMiB int    // spark.executor.memory; default 1024
	ExecutorCores     string // spark.executor.cores; default "1"

	// Conf holds any other spark.* setting; it lands in spark.properties. The typed fields above
	// win over Conf for the same key.
	Conf map[string]string

	// Rand feeds the app id, the resource prefix and the other random names; default crypto/rand.
	// Tests pass a seeded reader for determinism.
	Rand io.Reader
	// Now is the clock for the time-derived name parts (launch time, uniqueID) and the
	// properties file's date line; default time.Now.
	Now func() time.Time
}

// Plan is everything spark-submit builds before it sends anything: names fixed once, the resolved
// properties and the three objects. ConfigMap and Service have no ownerReference yet (they get one
// to the created pod).
type Plan struct {
	Version       Version
	AppID         string // spark.app.id: "spark-<32 hex>"
	Prefix        string // the resource name prefix: "<name>-<hex>" (2.4: "<name>-<millis>")
	DriverPodName string
	ConfigMapName string
	ServiceName   string
	// Properties is every setting written to spark.properties.
	Properties map[string]string
	DriverPod  *corev1.Pod
	ConfigMap  *corev1.ConfigMap
	Service    *corev1.Service
	// Claims are the driver's PersistentVolumeClaims spark-submit creates (claimName OnDemand, or
	// any claim given a storage class and a size), owned by the pod like the Service.
	Claims []*corev1.PersistentVolumeClaim
}

// conf returns the SparkConf spark-submit starts from: Conf, then the typed fields, then the
// settings spark-submit itself records for a cluster-mode submission.
func (a App) conf(t traits) map[string]string {
	c := maps.Clone(a.Conf)
	if c == nil {
		c = map[string]string{}
	}
	set := func(k, v string) {
		if v != "" {
			c[k] = v
		}
	}
	setIfMissing := func(k, v string) {
		if _, ok := c[k]; !ok {
			c[k] = v
		}
	}
	set("spark.app.name", a.Name)
	set("spark.kubernetes.namespace", a.Namespace)
	set("spark.kubernetes.container.image", a.Image)
	set("spark.kubernetes.driver.pod.name", a.DriverPodName)
	set("spark.kubernetes.authenticate.driver.serviceAccountName", a.ServiceAccount)
	set("spark.driver.cores", a.DriverCores)
	set("spark.kubernetes.driver.limit.cores", a.DriverCoreLimit)
	set("spark.executor.cores", a.ExecutorCores)
	if a.DriverMemoryMiB > 0 {
		c["spark.driver.memory"] = strconv.Itoa(a.DriverMemoryMiB) + "m"
	}
	if a.ExecutorMemoryMiB > 0 {
		c["spark.executor.memory"] = strconv.Itoa(a.ExecutorMemoryMiB) + "m"
	}
	if a.ExecutorInstances > 0 {
		c["spark.executor.instances"] = strconv.Itoa(a.ExecutorInstances)
	}
	for k, v := range a.DriverLabels {
		c["spark.kubernetes.driver.label."+k] = v
	}
	for k, v := range a.DriverAnnotations {
		c["spark.kubernetes.driver.annotation."+k] = v
	}
	for k, v := range a.ExecutorLabels {
		c["spark.kubernetes.executor.label."+k] = v
	}
	setIfMissing("spark.app.name", "spark")
	setIfMissing("spark.kubernetes.namespace", "default")
	setIfMissing("spark.kubernetes.container.image", "apache/spark:"+string(a.Version))
	setIfMissing("spark.executor.instances", strconv.Itoa(DefaultExecutorInstances))
	setIfMissing("spark.master", DefaultMaster)
	c["spark.submit.deployMode"] = "cluster"
	// SparkSubmit merges the primary resource into spark.jars for a JVM app in cluster mode.
	if _, ok := c["spark.jars"]; !ok && a.language() == langJVM {
		c["spark.jars"] = a.resource()
	}
	if t.oldConfMap {
		c[confPyFiles] = ""
		nonJVMConf24(c, a)
	} else {
		c["spark.submit.pyFiles"] = ""
	}
	return c
}

func (a App) resource() string {
	switch a.language() {
	case langPython:
		return a.PyFile
	case langR:
		return a.RFile
	}
	if a.Resource == "" {
		return DefaultResource
	}
	return a.Resource
}

func (a App) mainClass() string {
	switch a.language() {
	case langPython:
		return PythonRunner
	case langR:
		return RRunner
	}
	if a.MainClass == "" {
		return DefaultMainClass
	}
	return a.MainClass
}

func (a App) ids() ids {
	g := ids{rand: a.Rand, now: a.Now}
	if g.rand == nil {
		g.rand = rand.Reader
	}
	if g.now == nil {
		g.now = time.Now
	}
	return g
}

// Plan builds, without sending anything, every object spark-submit would create for a, in the
// order spark-submit draws its random names (app id, prefix, ConfigMap name, local dir).
func (a App) Plan() (*Plan, error) {
	t, err := a.Version.traits()
	if err != nil {
		return nil, err
	}
	if a.PyFile != "" && a.RFile != "" {
		return nil, fmt.Errorf("sparksim: an app has one main file, PyFile %q or RFile %q", a.PyFile, a.RFile)
	}
	conf := a.conf(t)
	// DriverServiceFeatureStep: the driver's host and bind address are Spark's to manage.
	for _, k := range []string{"spark.driver.bindAddress", "spark.driver.host"} {
		if _, ok := conf[k]; ok {
			return nil, fmt.Errorf("sparksim: requirement failed: %s is not supported in Kubernetes mode", k)
		}
	}
	g := a.ids()
	p := &Plan{Version: a.Version}
	if p.AppID, err = g.appID(); err != nil {
		return nil, err
	}
	if p.Prefix, err = g.resourcePrefix(a.Version, conf["spark.app.name"]); err != nil {
		return nil, err
	}
	p.DriverPodName = conf["spark.kubernetes.driver.pod.name"]
	if p.DriverPodName == "" {
		p.DriverPodName = p.Prefix + "-driver"
	}
	if p.ServiceName, err = serviceName(g, t, p.Prefix); err != nil {
		return nil, err
	}
	if t.oldConfMap {
		p.ConfigMapName = p.Prefix + "-driver-conf-map"
	} else {
		id, err := g.uniqueID()
		if err != nil {
			return nil, err
		}
		p.ConfigMapName = "spark-drv-" + id + "-conf-map"
	}
	localDir, err := g.uuid()
	if err != nil {
		return nil, err
	}
	b := driverBuilder{app: a, t: t, conf: conf, plan: p, localDir: "/var/data/spark-" + localDir}
	if err := b.build(g.now()); err != nil {
		return nil, err
	}
	return p, nil
}
