package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The conf keys that steer the simulated driver (all optional; set them with --conf or in the
// properties file like any Spark setting).
const (
	ConfRunSeconds       = "spark.driverset.sim.runSeconds"
	ConfExitCode         = "spark.driverset.sim.exitCode"
	ConfControlConfigMap = "spark.driverset.sim.controlConfigMap"
	ConfSpawnOrphan      = "spark.driverset.sim.spawnOrphan"
	// ConfSpillMiB writes that many MiB to the container's own disk once started, as a driver
	// spilling to its local dir does (what the kubelet charges to its ephemeral storage).
	ConfSpillMiB = "spark.driverset.sim.spillMiB"

	// ControlExitKey is the key of the control ConfigMap whose value ends the driver with that code.
	ControlExitKey = "exit"

	defaultDriverPort = 7078 // spark.driver.port
	defaultExecutors  = 2    // spark.executor.instances
	defaultRunSeconds = 30
)

// plan is what the driver does, decided from its effective conf alone.
type plan struct {
	port             int
	executors        int
	run              time.Duration // 0: no time limit
	exitCode         int           // when run is over
	controlConfigMap string        // "" for none
	spawnOrphan      bool
	spillMiB         int
}

// planFor reads the driver's conf. runSeconds 0 means no time limit: the driver then ends only
// through the control ConfigMap or a signal.
func planFor(conf map[string]string) (plan, error) {
	p := plan{controlConfigMap: conf[ConfControlConfigMap]}
	var errs []error
	intOf := func(key string, def, lo, hi int) int {
		s, ok := conf[key]
		if !ok {
			return def
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < lo || n > hi {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer in [%d, %d]", key, s, lo, hi))
		}
		return n
	}
	p.port = intOf("spark.driver.port", defaultDriverPort, 0, 65535)
	p.executors = intOf("spark.executor.instances", defaultExecutors, 0, 1<<20)
	p.run = time.Duration(intOf(ConfRunSeconds, defaultRunSeconds, 0, 1<<30)) * time.Second
	p.exitCode = intOf(ConfExitCode, 0, 0, 255)
	p.spillMiB = intOf(ConfSpillMiB, 0, 0, 1<<16)
	if s, ok := conf[ConfSpawnOrphan]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", ConfSpawnOrphan, s))
		}
		p.spawnOrphan = b
	}
	return p, errors.Join(errs...)
}

// controlExit reads the control ConfigMap's exit key: ok is false while it is unset.
func controlExit(data map[string]string) (code int, ok bool, err error) {
	s, set := data[ControlExitKey]
	if !set {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > 255 {
		return 0, false, fmt.Errorf("control key %s=%q: want an exit code in [0, 255]", ControlExitKey, s)
	}
	return n, true, nil
}

// parseDriverURL splits an executor's SPARK_DRIVER_URL, spark://<endpoint>@<host>:<port>.
func parseDriverURL(u string) (host, port string, err error) {
	rest, ok := strings.CutPrefix(u, "spark://")
	if !ok {
		return "", "", fmt.Errorf("driver URL %q: want spark://CoarseGrainedScheduler@host:port", u)
	}
	name, addr, ok := strings.Cut(rest, "@")
	if !ok || name == "" {
		return "", "", fmt.Errorf("driver URL %q names no endpoint", u)
	}
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("driver URL %q: %w", u, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return "", "", fmt.Errorf("driver URL %q: bad host or port", u)
	}
	return host, port, nil
}
