package lua

import "time"

// The login scripts (internal/auth).

// LoginCodeKeys are one phone's keys, sharing the hash tag {<phone>}.
type LoginCodeKeys struct {
	Code   string // hash {code, tries, deployment}
	Gap    string // present while the send cooldown runs
	Streak string // sends of the current streak
}

// LoginCode is a code to store and the send policy.
type LoginCode struct {
	Code        string
	TTL         time.Duration
	Cooldown    time.Duration // the base cooldown between sends
	MaxCooldown time.Duration // the escalating cooldown's cap
	FreeSends   int           // sends of a streak at the base cooldown
	Streak      time.Duration // a streak ends after this long without a send
	Deployment  string        // only this deployment accepts the code
}

// SendReply is login_send_code.lua's answer.
type SendReply struct {
	Stored bool
	// Cooldown: stored, the cooldown now running; refused, what is left of the running one.
	Cooldown time.Duration
}

var loginSendCode = newScript(func(reply any) (SendReply, bool) {
	r, ok := ints(reply, 2)
	if !ok || (r[0] != 1 && r[0] != -1) {
		return SendReply{}, false
	}
	return SendReply{Stored: r[0] == 1, Cooldown: time.Duration(r[1]) * time.Millisecond}, true
}, "login_send_code.lua")

// LoginSendCode stores a fresh login code unless the phone's cooldown runs, and starts the
// next, escalating, cooldown.
func LoginSendCode(keys LoginCodeKeys, c LoginCode) Call[SendReply] {
	return loginSendCode.call([]string{keys.Code, keys.Gap, keys.Streak}, c.Code, c.TTL.Milliseconds(),
		c.Cooldown.Milliseconds(), c.MaxCooldown.Milliseconds(), c.FreeSends, c.Streak.Milliseconds(), c.Deployment)
}

// VerifyOutcome is what login_verify_code.lua found.
type VerifyOutcome int64

const (
	CodeRight   VerifyOutcome = 1  // the code is used up: log in
	CodeWrong   VerifyOutcome = 0  // a wrong try counted, tries are left
	CodeMissing VerifyOutcome = -1 // never sent, or expired
	CodeLocked  VerifyOutcome = -2 // too many wrong tries
	CodeForeign VerifyOutcome = -3 // sent by another deployment: left untouched
	// CodeCapped: locked, and the phone has used its wrong tries of the window: each new code
	// allows one try until the window ends.
	CodeCapped VerifyOutcome = -4
)

var loginVerifyCode = newScript(func(reply any) (VerifyOutcome, bool) {
	n, ok := reply.(int64)
	return VerifyOutcome(n), ok && n >= int64(CodeCapped) && n <= int64(CodeRight)
}, "login_verify_code.lua")

// LoginVerifyKeys are one phone's keys for checking a code, sharing the hash tag {<phone>}.
type LoginVerifyKeys struct {
	Code    string // hash {code, tries, deployment}
	Guesses string // the phone's wrong tries in the window
}

// LoginVerify is a submitted code and the try limits.
type LoginVerify struct {
	Code       string
	MaxTries   int           // wrong tries per code
	PerWindow  int           // wrong tries per phone per Window at MaxTries per code; then one per code
	Window     time.Duration // fixed, from the phone's first wrong try
	Deployment string        // only codes this deployment sent are checked
}

// LoginVerifyCode checks a login code, counting wrong tries per code and per phone, and burning
// the code on success.
func LoginVerifyCode(keys LoginVerifyKeys, v LoginVerify) Call[VerifyOutcome] {
	return loginVerifyCode.call([]string{keys.Code, keys.Guesses}, v.Code, v.MaxTries, v.Deployment,
		v.PerWindow, v.Window.Milliseconds())
}

// RateReply is rate_window.lua's answer.
type RateReply struct {
	Allowed bool
	RetryIn time.Duration // refused: until the window ends
}

var rateWindow = newScript(func(reply any) (RateReply, bool) {
	r, ok := ints(reply, 2)
	if !ok || (r[0] != 0 && r[0] != 1) {
		return RateReply{}, false
	}
	return RateReply{Allowed: r[0] == 1, RetryIn: time.Duration(r[1]) * time.Millisecond}, true
}, "rate_window.lua")

// RateWindow counts an event in a fixed window of key against limit.
func RateWindow(key string, limit int, window time.Duration) Call[RateReply] {
	return rateWindow.call([]string{key}, limit, window.Milliseconds())
}
