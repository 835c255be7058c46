package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/testenv"
)

func TestWrongTriesPerPhonePerDay(t *testing.T) { testenv.EachRedis(t, testWrongTriesPerPhone) }

// A phone gets 10 wrong tries a day at 5 per code (two codes' worth); after them each code
// allows one try, so a guesser gets one guess per code sent, while the owner, who has the
// code, still logs in with it.
func testWrongTriesPerPhone(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	svc, sender, _ := newService(t, rdb, auth.Options{})
	phone := testenv.Phone()
	keys := svc.PhoneKeys(phone)
	newCode := func() string {
		t.Helper()
		rdb.Del(ctx, keys[1]) // the cooldown has passed
		if _, err := svc.SendCode(ctx, phone); err != nil {
			t.Fatal(err)
		}
		return sender.code(phone)
	}
	guess := func(code string) error {
		_, _, err := svc.Login(ctx, phone, code)
		return err
	}
	for c := 1; c <= 2; c++ {
		right := newCode()
		for i := 1; i <= 4; i++ {
			if err := guess(wrongCode(right)); err == nil || err.Error() != "wrong code" {
				t.Fatalf("code %d, wrong try %d: %v, want a plain wrong code", c, i, err)
			}
		}
		if err := guess(wrongCode(right)); apperr.CodeOf(err) != apperr.BadUserInput || !strings.Contains(err.Error(), "too many wrong tries") {
			t.Fatalf("code %d, wrong try 5: %v, want the code locked", c, err)
		}
	}
	if n, _ := rdb.Get(ctx, keys[3]).Int(); n != 10 {
		t.Fatalf("the phone's wrong tries: %d, want 10", n)
	}
	if ttl := rdb.PTTL(ctx, keys[3]).Val(); ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("the wrong tries' TTL is %v, want 24 h from the first", ttl)
	}
	for c := 3; c <= 5; c++ {
		right := newCode()
		err := guess(wrongCode(right))
		if apperr.CodeOf(err) != apperr.BadUserInput || !strings.Contains(err.Error(), "for this phone today") {
			t.Fatalf("code %d, after 10 wrong tries in the day: %v, want one try per code", c, err)
		}
		if err := guess(right); err == nil {
			t.Fatalf("code %d: the right code was accepted after its one try was spent", c)
		}
	}
	// The owner, with the code in hand, is not locked out.
	right := newCode()
	if err := guess(right); err != nil {
		t.Fatalf("the right code at the first try, past the day's wrong tries: %v", err)
	}
}

func TestRefusedSendsDoNotUseUpTheWindow(t *testing.T) {
	testenv.EachRedis(t, testRefusedSendsDoNotUseUpTheWindow)
}

// Sends the phone's cooldown refuses are not counted in the deployment's window: a client
// sending to one phone again and again does not use it up for everyone else.
func testRefusedSendsDoNotUseUpTheWindow(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	ns := "fair" + testenv.Phone()
	testenv.CleanupKeys(t, rdb, ns+":*")
	svc, _, db := newService(t, rdb, auth.Options{Namespace: ns, SendsGlobal: auth.Rate{Count: 2, Window: time.Minute}})
	phones := registered(t, db.Ent, 3)
	if _, err := svc.SendCode(ctx, phones[0]); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, err := svc.SendCode(ctx, phones[0])
		if apperr.CodeOf(err) != apperr.RateLimited || !strings.Contains(err.Error(), "sent to this phone recently") {
			t.Fatalf("send %d to a phone in its cooldown: %v, want its cooldown", i+2, err)
		}
	}
	if _, err := svc.SendCode(ctx, phones[1]); err != nil {
		t.Fatalf("the second send the window allows, after sends its phone's cooldown refused: %v", err)
	}
	if _, err := svc.SendCode(ctx, phones[2]); apperr.CodeOf(err) != apperr.RateLimited || !strings.Contains(err.Error(), "server-wide") {
		t.Fatalf("the third send in a window of 2: %v, want the server-wide limit", err)
	}
}

func TestNewPhonesHaveAWindowOfTheirOwn(t *testing.T) {
	testenv.EachRedis(t, testNewPhonesHaveAWindowOfTheirOwn)
}

// Sends to phones of no user (any number will do, the cheap way to fill a window) use up
// their own window, never the one of returning users; and the other way round.
func testNewPhonesHaveAWindowOfTheirOwn(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	ns := "new" + testenv.Phone()
	testenv.CleanupKeys(t, rdb, ns+":*")
	svc, _, db := newService(t, rdb, auth.Options{Namespace: ns,
		SendsGlobal: auth.Rate{Count: 2, Window: time.Minute}, SendsNew: auth.Rate{Count: 3, Window: time.Minute}})
	known := registered(t, db.Ent, 3)
	for i := range 3 {
		if _, err := svc.SendCode(ctx, testenv.Phone()); err != nil {
			t.Fatalf("send %d to a new phone: %v", i+1, err)
		}
	}
	_, err := svc.SendCode(ctx, testenv.Phone())
	if apperr.CodeOf(err) != apperr.RateLimited || !strings.Contains(err.Error(), "new phones") {
		t.Fatalf("4th send to a new phone in a window of 3: %v, want the new phones' limit", err)
	}
	for i, phone := range known[:2] {
		if _, err := svc.SendCode(ctx, phone); err != nil {
			t.Fatalf("send %d to a returning user's phone, the new phones' window used up: %v", i+1, err)
		}
	}
	_, err = svc.SendCode(ctx, known[2])
	if apperr.CodeOf(err) != apperr.RateLimited || !strings.Contains(err.Error(), "server-wide: the service is busy") {
		t.Fatalf("3rd send to a returning user in a window of 2: %v, want the returning users' limit", err)
	}
}

// registered creates n users (returning users, to the send limits) and returns their phones.
func registered(t *testing.T, db *ent.Client, n int) []string {
	t.Helper()
	phones := make([]string, n)
	for i := range phones {
		phones[i] = testenv.Phone()
		db.User.Create().SetPhone(phones[i]).SetNickname("returning").SaveX(context.Background())
	}
	return phones
}
