package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// LogSender is the default CodeSender: it delivers nothing and logs the send, with the code
// only when Reveal is set: in dev mode, where sendLoginCode returns it anyway, or when the
// operator chose the log as the way codes reach them (SURGE_LOGIN_CODE_SENDER=log, Level
// WARN). Without Reveal a production log never holds a live code.
type LogSender struct {
	Logger *slog.Logger
	Reveal bool
	Level  slog.Level // of the line that reveals a code (INFO)
}

func (s LogSender) Send(ctx context.Context, phone, code string) error {
	l := s.Logger
	if l == nil {
		l = slog.Default()
	}
	if s.Reveal {
		l.Log(ctx, s.Level, "login code", "phone", MaskPhone(phone), "code", code)
		return nil
	}
	l.WarnContext(ctx, "login code not delivered: no SMS gateway is plugged in (set SURGE_LOGIN_CODE_SENDER, or plug in an auth.CodeSender)", "phone", MaskPhone(phone))
	return nil
}

// DefaultWebhookTimeout bounds one WebhookSender delivery: well within a request's deadline
// (5 s by default), so a hung webhook fails the send rather than the whole request.
const DefaultWebhookTimeout = 3 * time.Second

// WebhookSender delivers a code by POSTing {"phone": "<phone>", "code": "<code>"} as JSON to
// URL: an SMS gateway's adapter, a chat hook. Any 2xx answer within Timeout is a delivery;
// anything else (another status, a redirect, a transport error, the timeout) fails the send,
// which then gives the phone's cooldown back. User information in URL is sent as basic
// authentication. Errors name the webhook's host only, never the code or the URL's query.
type WebhookSender struct {
	URL     string
	Timeout time.Duration // DefaultWebhookTimeout when zero
	Client  *http.Client  // nil: a client that follows no redirect
}

// webhookClient follows no redirect: a redirected POST would hand the code to another URL.
var webhookClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// maxWebhookReply is the most of a webhook's answer read (and so the connection kept for reuse).
const maxWebhookReply = 64 << 10

func (s WebhookSender) Send(ctx context.Context, phone, code string) error {
	u, err := url.Parse(s.URL)
	if err != nil {
		return errors.New("auth: login code webhook: its URL does not parse")
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultWebhookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(struct {
		Phone string `json:"phone"`
		Code  string `json:"code"`
	}{phone, code})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("auth: login code webhook %s: %w", u.Host, err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := s.Client
	if client == nil {
		client = webhookClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a secret in its query
		}
		return fmt.Errorf("auth: login code webhook %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxWebhookReply))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("auth: login code webhook %s answered %s", u.Host, resp.Status)
	}
	return nil
}
