package testbed

import (
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WebhookClientName is the common name of the client certificate the apiserver presents to every
// admission webhook it calls.
const WebhookClientName = "kube-apiserver-webhook-client"

// webhookClient is the apiserver's identity towards admission webhooks, from a CA of its own (no
// user or node certificate is signed by it), and the admission configuration that presents it:
// what an admin configures so that a webhook can require the apiserver's certificate
// (driverset's --webhook-client-ca).
type webhookClient struct {
	CA, Client *keyPair
	// CACert is the CA's PEM file; AdmissionConfig the apiserver's --admission-control-config-file.
	CACert, AdmissionConfig string
}

// admissionConfig points both webhook admission plugins at one kubeconfig.
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: KUBECONFIG
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: KUBECONFIG
`

// newWebhookClient mints the identity and writes its files into dir.
func newWebhookClient(dir string) (*webhookClient, error) {
	ca, err := newCA("driverset-testbed-webhook-client-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.issue(certSpec{CommonName: WebhookClientName})
	if err != nil {
		return nil, err
	}
	w := &webhookClient{CA: ca, Client: leaf,
		CACert: filepath.Join(dir, "webhook-client-ca.crt"), AdmissionConfig: filepath.Join(dir, "admission.yaml")}
	if err := os.WriteFile(w.CACert, ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	// The user "*" is presented to every webhook, whatever its Service or URL.
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificateData: leaf.CertPEM, ClientKeyData: leaf.KeyPEM}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	config := []byte(strings.ReplaceAll(admissionConfig, "KUBECONFIG", kubeconfig))
	if err := os.WriteFile(w.AdmissionConfig, config, 0o600); err != nil {
		return nil, err
	}
	return w, nil
}

// WebhookClientCAFile is the CA file a webhook verifies the apiserver's client certificate with.
func (c *Cluster) WebhookClientCAFile() string { return c.webhookClient.CACert }

// WebhookClientCertPEM is the apiserver's webhook client certificate and key, for a test that
// calls a webhook as the apiserver would.
func (c *Cluster) WebhookClientCertPEM() (certPEM, keyPEM []byte) {
	return c.webhookClient.Client.CertPEM, c.webhookClient.Client.KeyPEM
}
