package testbed

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// contextName names the single cluster/user/context in every kubeconfig the test bed writes.
const contextName = "driverset-testbed"

// writeKubeconfig writes a kubeconfig for one client-certificate identity, with the data
// embedded so that the file can be copied or used from any working directory.
func writeKubeconfig(path, server string, ca []byte, id *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{ClientCertificateData: id.CertPEM, ClientKeyData: id.KeyPEM}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	return clientcmd.WriteToFile(*cfg, path)
}

// restConfig is the in-process twin of the admin kubeconfig.
func restConfig(server string, ca []byte, id *keyPair) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   ca,
			CertData: id.CertPEM,
			KeyData:  id.KeyPEM,
		},
		// Tests create and watch many objects quickly; the default 5 QPS would be the bottleneck.
		QPS:   100,
		Burst: 200,
	}
}
