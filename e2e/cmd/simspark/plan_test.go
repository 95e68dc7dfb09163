package main

import (
	"testing"
	"time"
)

func TestPlanFor(t *testing.T) {
	defaults := plan{port: 7078, executors: 2, run: 30 * time.Second}
	for _, tc := range []struct {
		name string
		conf map[string]string
		want plan
		bad  bool
	}{
		{name: "nothing set: Spark's port, 2 executors, 30 s then exit 0", conf: map[string]string{}, want: defaults},
		{name: "Spark's own settings", conf: map[string]string{"spark.driver.port": "7100", "spark.executor.instances": "5"},
			want: plan{port: 7100, executors: 5, run: 30 * time.Second}},
		{name: "ends after 3 s with 4", conf: map[string]string{ConfRunSeconds: "3", ConfExitCode: "4"},
			want: plan{port: 7078, executors: 2, run: 3 * time.Second, exitCode: 4}},
		{name: "0 s is no time limit, a control ConfigMap ends it",
			conf: map[string]string{ConfRunSeconds: "0", ConfControlConfigMap: "ctl"},
			want: plan{port: 7078, executors: 2, controlConfigMap: "ctl"}},
		{name: "orphan", conf: map[string]string{ConfSpawnOrphan: "true"},
			want: plan{port: 7078, executors: 2, run: 30 * time.Second, spawnOrphan: true}},
		{name: "orphan off", conf: map[string]string{ConfSpawnOrphan: "false"}, want: defaults},
		{name: "spills 64 MiB to local disk", conf: map[string]string{ConfSpillMiB: "64"},
			want: plan{port: 7078, executors: 2, run: 30 * time.Second, spillMiB: 64}},
		{name: "a negative spill", conf: map[string]string{ConfSpillMiB: "-1"}, bad: true},
		{name: "no executors", conf: map[string]string{"spark.executor.instances": "0"},
			want: plan{port: 7078, run: 30 * time.Second}},
		{name: "exit code above 255", conf: map[string]string{ConfExitCode: "256"}, bad: true},
		{name: "negative run", conf: map[string]string{ConfRunSeconds: "-1"}, bad: true},
		{name: "port not a number", conf: map[string]string{"spark.driver.port": "x"}, bad: true},
		{name: "orphan not a bool", conf: map[string]string{ConfSpawnOrphan: "yes please"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planFor(tc.conf)
			if tc.bad {
				if err == nil {
					t.Errorf("accepted: %+v", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestControlExit(t *testing.T) {
	for _, tc := range []struct {
		data    map[string]string
		code    int
		ok, bad bool
	}{
		{data: nil},
		{data: map[string]string{"other": "1"}},
		{data: map[string]string{"exit": "0"}, code: 0, ok: true},
		{data: map[string]string{"exit": " 42\n"}, code: 42, ok: true},
		{data: map[string]string{"exit": "300"}, bad: true},
		{data: map[string]string{"exit": "fail"}, bad: true},
	} {
		code, ok, err := controlExit(tc.data)
		if code != tc.code || ok != tc.ok || (err != nil) != tc.bad {
			t.Errorf("%v: got %d %v %v", tc.data, code, ok, err)
		}
	}
}

func TestParseDriverURL(t *testing.T) {
	for _, tc := range []struct {
		url, host, port string // host "" means refused
	}{
		{"spark://CoarseGrainedScheduler@spark-pi-driver-svc.apps.svc:7078", "spark-pi-driver-svc.apps.svc", "7078"},
		{"spark://CoarseGrainedScheduler@10.0.0.7:7100", "10.0.0.7", "7100"},
		{"spark://CoarseGrainedScheduler@[fd00::7]:7078", "fd00::7", "7078"},
		{"http://CoarseGrainedScheduler@h:7078", "", ""},
		{"spark://h:7078", "", ""},
		{"spark://CoarseGrainedScheduler@h", "", ""},
		{"spark://CoarseGrainedScheduler@h:0", "", ""},
		{"spark://CoarseGrainedScheduler@:7078", "", ""},
	} {
		host, port, err := parseDriverURL(tc.url)
		if tc.host == "" {
			if err == nil {
				t.Errorf("%s: accepted as %s %s", tc.url, host, port)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("%s: got %q %q %v", tc.url, host, port, err)
		}
	}
}
