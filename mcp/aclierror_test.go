package mcp

import (
	"testing"

	"github.com/clihost/clihost/acli"
	"github.com/clihost/clihost/host"
)

// TestACLIErrorCodes: a refused path (category permission) and a login problem are ACLI's
// PERMISSION_DENIED; other CLI failures stay EXECUTION_ERROR with the code in the message.
func TestACLIErrorCodes(t *testing.T) {
	for _, c := range []struct {
		e    host.Error
		want string
	}{
		{host.Error{Code: "usage_error", Category: "permission", Message: "jq: error: Could not open file /etc/shadow: Permission denied"}, acli.PermissionDenied},
		{host.Error{Code: "auth_required", Category: "authentication"}, acli.PermissionDenied},
		{host.Error{Code: "usage_error", Category: "validation"}, acli.ExecutionError},
	} {
		if got := acliError(&c.e); got.Code != c.want {
			t.Errorf("%+v: ACLI code %s, want %s", c.e, got.Code, c.want)
		}
	}
}
