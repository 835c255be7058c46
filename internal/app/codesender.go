package app

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/surgekit/surge/internal/auth"
)

// Kinds of CodeSenderSetting.
const (
	SenderNone    = "none"    // codes go nowhere (dev mode logs them and returns them as devCode)
	SenderLog     = "log"     // codes are written to the server's log at WARN
	SenderWebhook = "webhook" // codes are POSTed as JSON to URL
)

// CodeSenderSetting is how a server delivers login codes (SURGE_LOGIN_CODE_SENDER): "none",
// "log" or "webhook:<url>". A production server never returns a code to the client, so
// without "log", a webhook or an auth.CodeSender of one's own (an SMS gateway) nobody can log
// in there; "log" is the way in for a demo stack and for bootstrapping an admin.
type CodeSenderSetting struct {
	Kind string // SenderNone, SenderLog or SenderWebhook
	URL  string // SenderWebhook only: http(s), user information sent as basic authentication
}

// parseCodeSender reads SURGE_LOGIN_CODE_SENDER; empty is "none".
func parseCodeSender(v string) (CodeSenderSetting, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "", SenderNone:
		return CodeSenderSetting{Kind: SenderNone}, nil
	case SenderLog:
		return CodeSenderSetting{Kind: SenderLog}, nil
	}
	if raw, ok := strings.CutPrefix(v, SenderWebhook+":"); ok {
		u, err := url.Parse(raw)
		if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			return CodeSenderSetting{Kind: SenderWebhook, URL: raw}, nil
		}
		return CodeSenderSetting{}, fmt.Errorf("%s: webhook %q is not an http:// or https:// URL with a host", setting("login-code-sender"), redactURL(raw))
	}
	return CodeSenderSetting{}, fmt.Errorf(`%s: %q is not "none", "log" or "webhook:<url>"`, setting("login-code-sender"), v)
}

// redactURL hides a password in a URL that is to be shown in an error.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(an unparsable URL)"
}

// codeSender builds the sender the setting names. Dev mode writes codes to the log whatever
// the setting (sendLoginCode returns them there anyway), unless a webhook takes them.
func codeSender(s CodeSenderSetting, dev bool, log *slog.Logger) auth.CodeSender {
	switch s.Kind {
	case SenderWebhook:
		return auth.WebhookSender{URL: s.URL}
	case SenderLog:
		return auth.LogSender{Logger: log, Reveal: true, Level: slog.LevelWarn}
	}
	return auth.LogSender{Logger: log, Reveal: dev}
}
