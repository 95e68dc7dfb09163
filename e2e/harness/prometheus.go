package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PrometheusBin is the folder with promtool: $DRIVERSET_PROMETHEUS_BIN, else what
// hack/prometheus-build.sh prints (it builds it from the Go module proxy once, then reuses it).
func PrometheusBin(ctx context.Context) (string, error) {
	if dir := os.Getenv("DRIVERSET_PROMETHEUS_BIN"); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "prometheus-build.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/prometheus-build.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// ServiceAccountToken makes ServiceAccount ns/name (when missing), binds it to ClusterRole role
// (when role is not empty) and returns a token of it, valid for a day.
func ServiceAccountToken(ctx context.Context, cs kubernetes.Interface, ns, name, role string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	if role != "" {
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	day := int64(24 * 3600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tok.Status.Token, nil
}

// Scrape GETs url (driverset's HTTPS /metrics) with token as the bearer ("": none) and returns
// the status code and body. The certificate is controller-runtime's self-signed one: not verified.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // controller-runtime's self-signed metrics certificate
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
