package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files under DIR/pki.
const (
	caCert        = "ca.crt"
	caKey         = "ca.key"
	apiserverCert = "apiserver.crt"
	apiserverKey  = "apiserver.key"
	adminCert     = "admin.crt"
	adminKey      = "admin.key"
	saKey         = "sa.key"
	saPub         = "sa.pub"
)

// ensurePKI writes a CA, the apiserver's serving pair, an admin client pair (system:masters)
// and the service-account signing key, unless they exist (a restart keeps its identity).
func ensurePKI(dir string) error {
	pki := filepath.Join(dir, "pki")
	if _, err := os.Stat(filepath.Join(pki, saPub)); err == nil {
		return nil
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	now := time.Now().Add(-5 * time.Minute)
	ca, caSigner, err := newKey()
	if err != nil {
		return err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "gateway-dns-test-cluster-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &ca.PublicKey, caSigner)
	if err != nil {
		return err
	}
	caParsed, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePair(pki, caCert, caKey, caDER, ca); err != nil {
		return err
	}
	leaf := func(certFile, keyFile string, template *x509.Certificate) error {
		key, _, err := newKey()
		if err != nil {
			return err
		}
		template.SerialNumber = serial()
		template.NotBefore = now
		template.NotAfter = now.Add(365 * 24 * time.Hour)
		template.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, template, caParsed, &key.PublicKey, caSigner)
		if err != nil {
			return err
		}
		return writePair(pki, certFile, keyFile, der, key)
	}
	if err := leaf(apiserverCert, apiserverKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1"), net.ParseIP(nodeIP)},
	}); err != nil {
		return err
	}
	if err := leaf(adminCert, adminKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	sa, _, err := newKey()
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(pki, saKey), sa); err != nil {
		return err
	}
	// Written last: its presence says the whole set exists.
	return os.WriteFile(filepath.Join(pki, saPub), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func newKey() (*ecdsa.PrivateKey, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	return key, key, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial would still be a valid certificate.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writePair(dir, certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, keyFile), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// writeKubeconfig writes DIR/kubeconfig for the admin user, with the certificates inlined so the
// file works from any directory.
func writeKubeconfig(dir, host string, port int) error {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(dir, "pki", name))
		if err != nil {
			return "", err
		}
		return base64.StdEncoding.EncodeToString(data), nil
	}
	ca, err := read(caCert)
	if err != nil {
		return err
	}
	cert, err := read(adminCert)
	if err != nil {
		return err
	}
	key, err := read(adminKey)
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://%s:%d
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: admin@test
  context:
    cluster: test
    user: admin
current-context: admin@test
`, host, port, ca, cert, key)
	return os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(config), 0o600)
}
