//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/driverset/driverset/contract"
	"github.com/driverset/driverset/e2e/harness"
)

// metricsOf scrapes d's /metrics over HTTPS with the test bed's metrics-reader token.
func metricsOf(d *harness.Driverset) (string, error) {
	if d.MetricsURL == "" {
		return "", fmt.Errorf("driverset serves no metrics")
	}
	code, body, err := harness.Scrape(context.Background(), d.MetricsURL, bed.metricsToken)
	if err == nil && code != 200 {
		err = fmt.Errorf("GET %s: %d %s", d.MetricsURL, code, body)
	}
	return body, err
}

// sample is the value of series (as exposed: name{labels in order}) in body; ok false when absent.
func sample(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, found := strings.CutPrefix(line, series+" "); found {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

const (
	seriesWaiting   = `driverset_drivers{state="waiting-for-admin"}`
	seriesOldest    = `driverset_drivers_waiting_for_admin_oldest_seconds`
	seriesConverted = `driverset_admission_decisions_total{outcome="converted",reason="",webhook="driver"}`
	seriesDenied    = `driverset_admission_decisions_total{outcome="denied",reason="not-convertible",webhook="driver"}`
	seriesServing   = `driverset_certificate_expiry_seconds{certificate="serving"}`
	seriesLeader    = `leader_election_master_status{name="driverset.driverset.dev"}`
)

// TestObservability: driverset's /metrics is served over HTTPS to a token allowed GET /metrics
// and to no other; a conversion and a denial are counted, a driver kept on a dead node shows in
// the gauge with its wait, the served certificate's expiry is exposed; and each alert of the
// PrometheusRule fires on what was scraped (promtool, the alerts' expressions as shipped).
func TestObservability(t *testing.T) {
	ctx := context.Background()
	url := bed.driverset.MetricsURL

	// Who may scrape: the reader's token; not another ServiceAccount's (403), not anonymous (401).
	other, err := harness.ServiceAccountToken(ctx, kube(), "driverset-system", "not-a-scraper", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{{"the metrics reader", bed.metricsToken, 200}, {"another ServiceAccount", other, 403}, {"no token", "", 401}} {
		code, body, err := harness.Scrape(ctx, url, tc.token)
		if err != nil {
			t.Fatalf("%s: %v", tc.who, err)
		}
		if code != tc.want || (code == 200) != strings.Contains(body, "driverset_build_info") {
			t.Errorf("%s: %d, want %d (metrics in the body: %v)", tc.who, code, tc.want, strings.Contains(body, "driverset_build_info"))
		}
	}
	before, err := metricsOf(bed.driverset)
	if err != nil {
		t.Fatal(err)
	}

	// A conversion, and a denial: an opted-in driver pod with a fence-after that is no duration.
	ns := namespace(t, nil)
	kept := submit(t, app(ns, "kept"))
	denied := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "refused-driver", Namespace: ns,
			Labels:      map[string]string{contract.LabelSparkRole: contract.RoleDriver, contract.LabelResilient: "true"},
			Annotations: map[string]string{contract.AnnotationFenceAfter: "2 minutes"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: contract.DriverContainerName, Image: "apache/spark:3.5.6",
			Args: []string{"driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Pi", "spark-internal"}}}},
	}
	if _, err := kube().CoreV1().Pods(ns).Create(ctx, denied, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "is not a duration") {
		t.Fatalf("creating a driver with fence-after %q: %v, want a denial", "2 minutes", err)
	}

	// The driver's node dies and nobody acts: the driver waits for an admin.
	names := contract.NamesFor(kept.plan.DriverPodName)
	d0 := runningDriver(t, ns, names, "")
	cutOff(t, d0.Spec.NodeName)
	killed := time.Now()
	var after string
	waitFor(t, 3*time.Minute, "the gauge to show a driver waiting for an admin", func(context.Context) (bool, error) {
		body, err := metricsOf(bed.driverset)
		after = body
		n, _ := sample(body, seriesWaiting)
		return err == nil && n >= 1, nil
	})
	if p := getPod(t, ns, names.DriverPodName()); p.UID != d0.UID {
		t.Fatalf("the driver pod was replaced (%s), want it kept", p.UID)
	}

	values := map[string]float64{}
	for _, s := range []string{seriesWaiting, seriesOldest, seriesConverted, seriesDenied, seriesServing, seriesLeader} {
		v, ok := sample(after, s)
		if !ok {
			t.Fatalf("%s is not served", s)
		}
		values[s] = v
		t.Logf("scraped %s %v", s, v)
	}
	convertedBefore, _ := sample(before, seriesConverted)
	deniedBefore, _ := sample(before, seriesDenied)
	if d := values[seriesConverted] - convertedBefore; d < 1 {
		t.Errorf("conversions by the driver webhook went up by %v, want at least 1", d)
	}
	if d := values[seriesDenied] - deniedBefore; d != 1 {
		t.Errorf("not-convertible denials went up by %v, want 1", d)
	}
	if age := values[seriesOldest]; age <= 0 || age > time.Since(killed).Seconds() {
		t.Errorf("oldest wait for an admin %vs, want in (0, %.0f] (the node died %.0fs ago)", age, time.Since(killed).Seconds(), time.Since(killed).Seconds())
	}
	// The harness's serving certificate is valid for 24 h.
	if left := values[seriesServing]; left <= 0 || left > 24*3600 {
		t.Errorf("serving certificate expiry %vs, want in (0, 86400]", left)
	}
	if values[seriesLeader] != 1 {
		t.Errorf("%s = %v on the only replica, want 1", seriesLeader, values[seriesLeader])
	}
	promtoolOnScraped(t, values, deniedBefore)
}

// promtoolOnScraped runs the shipped alert expressions (annotations dropped: their text is
// tested by e2e/install) in promtool's unit tests, on series that start at the scraped values:
// the wait and the certificate's time left move on with the clock, the denial counter stays where
// it was scraped, and the leader's and build's series stop, as when no replica is scraped.
func promtoolOnScraped(t *testing.T, v map[string]float64, deniedBefore float64) {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "manifests", "components", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
		}
	}
	rules, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	// The wait passes 10 minutes at this minute.
	waitFires := int(math.Max(0, math.Floor((600-v[seriesOldest])/60))) + 1
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	tests := fmt.Sprintf(`rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: '%s'
        values: '%s+60x40'
      - series: 'driverset_admission_decisions_total{outcome="denied",reason="not-convertible",webhook="driver"}'
        values: '%s %sx40'
      - series: 'driverset_certificate_expiry_seconds{certificate="serving"}'
        values: '%s-60x40'
      - series: '%s'
        values: '%s %s %s'
      - series: 'driverset_build_info{version="dev"}'
        values: '1 1 1'
    alert_rule_test:
      - eval_time: %dm
        alertname: DriversetDriverWaitingForAdmin
        exp_alerts: [{exp_labels: {severity: warning}}]
      - eval_time: 2m
        alertname: DriversetAdmissionDenials
        exp_alerts: [{exp_labels: {severity: info, webhook: driver, reason: not-convertible}}]
      - eval_time: 12m
        alertname: DriversetCertificateExpiresSoon
        exp_alerts: [{exp_labels: {severity: warning, certificate: serving}}]
      - eval_time: 1m
        alertname: DriversetNoLeader
        exp_alerts: []
      - eval_time: 15m
        alertname: DriversetNoLeader
        exp_alerts: [{exp_labels: {severity: critical, name: driverset.driverset.dev}}]
      - eval_time: 15m
        alertname: DriversetDown
        exp_alerts: [{exp_labels: {severity: critical}}]
`, seriesOldest, f(v[seriesOldest]), f(deniedBefore), f(v[seriesDenied]), f(v[seriesServing]),
		seriesLeader, f(v[seriesLeader]), f(v[seriesLeader]), f(v[seriesLeader]), waitFires)
	dir := t.TempDir()
	for name, content := range map[string][]byte{"rules.yaml": rules, "scraped_test.yaml": []byte(tests)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	bin, err := harness.PrometheusBin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "promtool"), "test", "rules", "scraped_test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("promtool test rules on the scraped values:\n%s\n%s", tests, out)
	if err != nil {
		t.Errorf("an alert did not fire as expected on the scraped values: %v", err)
	}
}
