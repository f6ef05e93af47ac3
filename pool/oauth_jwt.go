package pool

// private_key_jwt client authentication (RFC 7523 §2.2, OpenID Connect
// Core §9) for the client credentials grant: instead of a secret the client
// sends a short-lived JWT signed with its private key. A new assertion is
// made for every token request, since each carries its own jti and expiry.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

// AuthMethodPrivateKeyJWT is the token endpoint authentication by a signed
// assertion (OAuthConfig.PrivateKeyPEM).
const AuthMethodPrivateKeyJWT = "private_key_jwt"

const jwtBearerAssertion = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime is how long a client assertion is valid: long enough for
// one token request, short enough to be useless if it leaks.
const assertionLifetime = time.Minute

// clientAssertion returns the form parameters of a private_key_jwt
// authentication of clientID to the authorization server audience.
func clientAssertion(keyPEM, alg, clientID, audience string) (url.Values, error) {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		return nil, errors.New("the private key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err2 := x509.ParseECPrivateKey(block.Bytes); err2 == nil {
			key = k
		} else if k, err3 := x509.ParsePKCS1PrivateKey(block.Bytes); err3 == nil {
			key = k
		} else {
			return nil, fmt.Errorf("the private key: %w", err)
		}
	}
	switch key.(type) {
	case *ecdsa.PrivateKey:
		if alg == "" {
			alg = "ES256"
		}
	case *rsa.PrivateKey:
		if alg == "" {
			alg = "RS256"
		}
	default:
		return nil, fmt.Errorf("the private key is a %T; want ECDSA (ES256) or RSA (RS256)", key)
	}
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience,
		"iat": now.Unix(), "exp": now.Add(assertionLifetime).Unix(), "jti": rand.Text(),
	})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	var sig []byte
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if alg != "ES256" || k.Curve.Params().BitSize != 256 {
			return nil, fmt.Errorf("signing algorithm %q with a P-%d key: only ES256 with P-256 is supported", alg, k.Curve.Params().BitSize)
		}
		r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
		if err != nil {
			return nil, err
		}
		// JWS §3.4: R and S as fixed 32-byte big-endian integers.
		sig = append(pad32(r), pad32(s)...)
	case *rsa.PrivateKey:
		if alg != "RS256" {
			return nil, fmt.Errorf("signing algorithm %q with an RSA key: only RS256 is supported", alg)
		}
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:]); err != nil {
			return nil, err
		}
	}
	return url.Values{
		"client_assertion_type": {jwtBearerAssertion},
		"client_assertion":      {signing + "." + enc.EncodeToString(sig)},
	}, nil
}

func pad32(n *big.Int) []byte {
	b := make([]byte, 32)
	return n.FillBytes(b)
}
