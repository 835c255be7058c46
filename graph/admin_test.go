package graph

import (
	"context"
	"errors"
	"testing"

	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
)

// openMutations are the mutations a caller other than an admin may call; each decides in its
// resolver who it serves. Every other mutation must carry @admin.
var openMutations = map[string]bool{"sendLoginCode": true, "login": true, "logout": true, "seckillVoucher": true}

// A new mutation cannot forget its authorisation: it is declared in the schema or listed
// above, on purpose.
func TestEveryMutationDeclaresWhoMayCallIt(t *testing.T) {
	schema := NewExecutableSchema(Config{}).Schema()
	seen := map[string]bool{}
	for _, f := range schema.Mutation.Fields {
		seen[f.Name] = true
		admin := f.Directives.ForName("admin") != nil
		if admin == openMutations[f.Name] {
			t.Errorf("mutation %s: @admin %v, listed as open %v: declare @admin, or list it in openMutations", f.Name, admin, openMutations[f.Name])
		}
	}
	for name := range openMutations {
		if !seen[name] {
			t.Errorf("openMutations lists %s, which the schema does not have", name)
		}
	}
}

func TestAdminOnly(t *testing.T) {
	for _, c := range []struct {
		name    string
		session *auth.Session
		code    apperr.Code
	}{
		{"anonymous", nil, apperr.Unauthenticated},
		{"user", &auth.Session{UserID: 1, Role: user.RoleUSER}, apperr.Forbidden},
		{"admin", &auth.Session{UserID: 2, Role: user.RoleADMIN}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.session != nil {
				ctx = auth.WithSession(ctx, "token", c.session)
			}
			ran := false
			res, err := adminOnly(ctx, nil, func(context.Context) (any, error) { ran = true; return "done", nil })
			if c.code == "" {
				if err != nil || !ran || res != "done" {
					t.Fatalf("admin: %v %v, ran %v", res, err, ran)
				}
				return
			}
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != c.code || ran {
				t.Fatalf("got %v (ran %v), want %s and no resolver", err, ran, c.code)
			}
		})
	}
}
