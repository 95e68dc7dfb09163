package testbed

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for any test run and for a human's `testbed up` session.
const certValidity = 7 * 24 * time.Hour

// keyPair is a certificate with its private key, both also kept as PEM for files and kubeconfigs.
type keyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// certSpec says what one leaf certificate is for.
type certSpec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool // serverAuth; otherwise clientAuth
}

// newCA makes a self-signed CA. ECDSA P-256 keys: generating them is instant, unlike RSA.
func newCA(name string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour), // tolerate small clock differences
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, tmpl, key, key)
}

// issue makes a leaf certificate signed by ca.
func (ca *keyPair) issue(s certSpec) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	usage := x509.ExtKeyUsageClientAuth
	if s.Server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		DNSNames:     s.DNSNames,
		IPAddresses:  s.IPs,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

func sign(tmpl, parent *x509.Certificate, key, parentKey crypto.Signer) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM,
	}, nil
}

func privateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func publicKeyPEM(key crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
}

// Component identities. The controller-manager and scheduler users are the ones the bootstrap
// RBAC policy grants their permissions to; admin is in system:masters.
const (
	userAdmin             = "testbed-admin"
	groupMasters          = "system:masters"
	userControllerManager = "system:kube-controller-manager"
	userScheduler         = "system:kube-scheduler"
	userFrontProxy        = "front-proxy-client"
)

// pki is every certificate and key the control plane needs, written under Dir/pki.
type pki struct {
	CA, FrontProxyCA                        *keyPair
	APIServer, Admin, ControllerManager     *keyPair
	Scheduler, FrontProxyClient             *keyPair
	KubeletClient                           *keyPair // the apiserver, to real kubelets
	ServiceAccountKey                       crypto.Signer
	ServiceAccountKeyPEM, ServiceAccountPub []byte
	files                                   pkiFiles
	serviceIP                               net.IP
}

// pkiFiles are the paths the component flags refer to.
type pkiFiles struct {
	CACert, CAKey                          string
	FrontProxyCACert                       string
	APIServerCert, APIServerKey            string
	FrontProxyClientCert, FrontProxyClient string
	SAKey, SAPub                           string
	KubeletClientCert, KubeletClientKey    string
}

// newPKI mints the cluster's certificates. serviceIP is the `kubernetes` Service's ClusterIP,
// which in-cluster clients would dial; it goes into the serving certificate's SANs.
func newPKI(serviceIP net.IP) (*pki, error) {
	p := &pki{serviceIP: serviceIP}
	var err error
	if p.CA, err = newCA("driverset-testbed-ca"); err != nil {
		return nil, err
	}
	if p.FrontProxyCA, err = newCA("driverset-testbed-front-proxy-ca"); err != nil {
		return nil, err
	}
	leaves := []struct {
		dst  **keyPair
		ca   *keyPair
		spec certSpec
	}{
		{&p.APIServer, p.CA, certSpec{
			CommonName: "kube-apiserver",
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			IPs:    []net.IP{net.IPv4(127, 0, 0, 1), serviceIP, net.ParseIP(realHostIP)},
			Server: true,
		}},
		{&p.Admin, p.CA, certSpec{CommonName: userAdmin, Organization: []string{groupMasters}}},
		{&p.ControllerManager, p.CA, certSpec{CommonName: userControllerManager}},
		{&p.Scheduler, p.CA, certSpec{CommonName: userScheduler}},
		{&p.FrontProxyClient, p.FrontProxyCA, certSpec{CommonName: userFrontProxy}},
		{&p.KubeletClient, p.CA, certSpec{CommonName: "kube-apiserver-kubelet-client", Organization: []string{groupMasters}}},
	}
	for _, l := range leaves {
		if *l.dst, err = l.ca.issue(l.spec); err != nil {
			return nil, err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p.ServiceAccountKey = saKey
	if p.ServiceAccountKeyPEM, err = privateKeyPEM(saKey); err != nil {
		return nil, err
	}
	if p.ServiceAccountPub, err = publicKeyPEM(saKey.Public()); err != nil {
		return nil, err
	}
	return p, nil
}

// write puts the files the components read into dir and remembers their paths.
func (p *pki) write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f := pkiFiles{
		CACert:               filepath.Join(dir, "ca.crt"),
		CAKey:                filepath.Join(dir, "ca.key"),
		FrontProxyCACert:     filepath.Join(dir, "front-proxy-ca.crt"),
		APIServerCert:        filepath.Join(dir, "apiserver.crt"),
		APIServerKey:         filepath.Join(dir, "apiserver.key"),
		FrontProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		FrontProxyClient:     filepath.Join(dir, "front-proxy-client.key"),
		SAKey:                filepath.Join(dir, "sa.key"),
		SAPub:                filepath.Join(dir, "sa.pub"),
		KubeletClientCert:    filepath.Join(dir, "kubelet-client.crt"),
		KubeletClientKey:     filepath.Join(dir, "kubelet-client.key"),
	}
	for path, data := range map[string][]byte{
		f.CACert:               p.CA.CertPEM,
		f.CAKey:                p.CA.KeyPEM,
		f.FrontProxyCACert:     p.FrontProxyCA.CertPEM,
		f.APIServerCert:        p.APIServer.CertPEM,
		f.APIServerKey:         p.APIServer.KeyPEM,
		f.FrontProxyClientCert: p.FrontProxyClient.CertPEM,
		f.FrontProxyClient:     p.FrontProxyClient.KeyPEM,
		f.SAKey:                p.ServiceAccountKeyPEM,
		f.SAPub:                p.ServiceAccountPub,
		f.KubeletClientCert:    p.KubeletClient.CertPEM,
		f.KubeletClientKey:     p.KubeletClient.KeyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	p.files = f
	return nil
}
