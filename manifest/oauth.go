package manifest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
)

// The OAuth 2.0 flows an oauth setup step drives (OAuthFlow.Flow).
const (
	FlowAuthorizationCode = "authorization_code" // RFC 6749 §4.1 with PKCE S256 (RFC 7636), loopback redirect (RFC 8252)
	FlowDeviceCode        = "device_code"        // RFC 8628
)

// reservedAuthParams are the authorization request's parameters the host sets itself: an
// authorization_url carrying one is refused (a second redirect_uri or state would subvert the flow).
var reservedAuthParams = []string{"redirect_uri", "state", "code_challenge", "code_challenge_method", "client_id", "response_type"}

// Check reports what makes f unusable: a missing client_id, an unknown flow, a missing endpoint the
// flow needs, an endpoint that is not https (or plain http to a loopback address), or an
// authorization_url presetting a parameter the host sets. The client is public: an OAuthFlow has
// no client secret.
func (f *OAuthFlow) Check() error {
	if f.ClientID == "" {
		return errors.New("oauth.client_id is missing")
	}
	if err := CheckOAuthEndpoint("oauth.token_url", f.TokenURL); err != nil {
		return err
	}
	switch f.Flow {
	case "", FlowAuthorizationCode:
		if err := CheckOAuthEndpoint("oauth.authorization_url", f.AuthorizationURL); err != nil {
			return err
		}
		q, _ := url.Parse(f.AuthorizationURL)
		for _, p := range reservedAuthParams {
			if q.Query().Has(p) {
				return fmt.Errorf("oauth.authorization_url sets %s, which the host sets itself", p)
			}
		}
	case FlowDeviceCode:
		return CheckOAuthEndpoint("oauth.device_authorization_url", f.DeviceAuthorizationURL)
	default:
		return fmt.Errorf("oauth.flow %q is not %s or %s", quotable(f.Flow), FlowAuthorizationCode, FlowDeviceCode)
	}
	return nil
}

// CheckOAuthEndpoint refuses an OAuth endpoint (name is the field, for the message) that is not an
// absolute https URL, or plain http to a loopback address (RFC 8252 §8.3: codes and tokens never
// cross a network in the clear), or that carries credentials or a fragment, or anything but
// printable ASCII (RFC 3986; an internationalized host in its xn-- form): the person is shown it
// as it is, where a bidi override, a control or a homograph host would make it read as another.
func CheckOAuthEndpoint(name, raw string) error {
	if raw == "" {
		return fmt.Errorf("%s is missing", name)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return fmt.Errorf("%s %q has characters other than printable ASCII: percent-encode them, and write an internationalized host in its xn-- form", name, quotable(raw))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%s %q is not an absolute URL", name, quotable(raw))
	case u.User != nil:
		return fmt.Errorf("%s %q carries credentials", name, quotable(raw))
	case u.Fragment != "":
		return fmt.Errorf("%s %q has a fragment", name, quotable(raw))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%s %q is plain http to a host that is not a loopback address: use https", name, quotable(raw))
	}
	return fmt.Errorf("%s %q is not an https URL", name, quotable(raw))
}

// IsLoopbackHost reports whether host is a loopback IP address or localhost.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// quotable shortens s to 200 runes and drops what is not printable, for quoting it in a message.
func quotable(s string) string {
	var b strings.Builder
	for i, r := range []rune(s) {
		if i == 200 {
			b.WriteString("…")
			break
		}
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
