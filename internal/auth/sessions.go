package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/internal/apperr"
)

// A user's sessions are listed in a sorted set, login:sessions:{<user id>}: the SHA-256 (hex)
// of each token, scored by its login time (Unix ms). The session lookup never reads it — a
// request still costs one Redis command — so a session must be in it for as long as it can be
// used, or nothing could end it but its TTL: a login lists the session before writing it, and
// checks afterwards that a revocation did not unlist it meanwhile. The set holds at most
// MaxSessionsPerUser (a login ends the oldest beyond) and lives SessionMaxAge after the last
// login, which is when the newest session ends at the latest.

// startSession writes a new session of u and returns its token.
func (s *Service) startSession(ctx context.Context, u *ent.User) (string, error) {
	token, err := randomToken()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	index, member := s.keys.sessions(u.ID), hex.EncodeToString(sum[:])
	var older *redis.StringSliceCmd
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, index, "-inf", strconv.FormatInt(now.Add(-s.opts.SessionMaxAge).UnixMilli(), 10))
		p.ZAdd(ctx, index, redis.Z{Score: float64(now.UnixMilli()), Member: member})
		p.PExpire(ctx, index, s.opts.SessionMaxAge)
		older = p.ZRange(ctx, index, 0, -int64(s.opts.MaxSessionsPerUser)-1) // all but the newest
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("auth: listing session: %w", err)
	}
	key := s.keys.session(sum)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, map[string]any{
			"id": u.ID, "phone": u.Phone, "nickname": u.Nickname, "icon": u.Icon,
			createdField: now.UnixMilli(), deploymentField: s.opts.Deployment,
		})
		p.PExpire(ctx, key, min(s.opts.SessionTTL, s.opts.SessionMaxAge))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("auth: storing session: %w", err)
	}
	if err := s.endSessions(ctx, u.ID, sums(older.Val())...); err != nil {
		return "", err
	}
	// A revocation between the listing and now has unlisted the session, and may have deleted
	// it before it was written: end it, or it would live on where no one can find it.
	if err := s.rdb.ZScore(ctx, index, member).Err(); err != nil {
		_ = s.endSessions(ctx, u.ID, sum) // on failure it still ends by its TTL
		if errors.Is(err, redis.Nil) {
			return "", apperr.New(apperr.Unauthenticated, "this user's sessions were revoked during the login: request a new code")
		}
		return "", fmt.Errorf("auth: checking the session's listing: %w", err)
	}
	// Just written with a full TTL: this process answers it from memory for SessionCache and
	// slides it first after SlideEvery.
	s.recent.Add(sum, recentSession{read: now, slid: now, end: now.Add(s.opts.SessionMaxAge),
		session: &Session{UserID: u.ID, Phone: u.Phone, Nickname: u.Nickname, Icon: u.Icon, Role: s.roleOf(u.Phone)}})
	return token, nil
}

// endSessions deletes sessions of a user (by the SHA-256 of their tokens), then unlists them:
// in that order, so that a session whose deletion failed stays listed, and can be ended later.
// This process forgets them at once.
func (s *Service) endSessions(ctx context.Context, userID int, ended ...[sha256.Size]byte) error {
	if len(ended) == 0 {
		return nil
	}
	members := make([]any, len(ended))
	for i, sum := range ended {
		s.recent.Remove(sum)
		members[i] = hex.EncodeToString(sum[:])
	}
	// One DEL per key: on a Cluster the sessions lie in different slots.
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sum := range ended {
			p.Del(ctx, s.keys.session(sum))
		}
		return nil
	})
	if err == nil {
		err = s.rdb.ZRem(ctx, s.keys.sessions(userID), members...).Err()
	}
	if err != nil {
		return fmt.Errorf("auth: ending sessions: %w", err)
	}
	for _, sum := range ended {
		s.watch.sessionEnded(sum)
	}
	return nil
}

// sums decodes index members; anything else there is skipped.
func sums(members []string) [][sha256.Size]byte {
	out := make([][sha256.Size]byte, 0, len(members))
	for _, m := range members {
		if sum, ok := decodeSum(m); ok {
			out = append(out, sum)
		}
	}
	return out
}

func decodeSum(member any) (sum [sha256.Size]byte, ok bool) {
	m, _ := member.(string)
	if len(m) != hex.EncodedLen(sha256.Size) { // hex.Decode would write past sum
		return sum, false
	}
	_, err := hex.Decode(sum[:], []byte(m))
	return sum, err == nil
}

// SessionInfo describes one session of a user, without anything that would let one use it.
type SessionInfo struct {
	ID        string    // the first 16 hex digits of the token's SHA-256
	CreatedAt time.Time // the login
	ExpiresAt time.Time // when it ends unless used again: idle expiry, or SessionMaxAge after the login
}

// Sessions lists the live sessions of a user, oldest first: NOT_FOUND if there is no such user.
func (s *Service) Sessions(ctx context.Context, userID int) ([]*SessionInfo, error) {
	if err := s.checkUser(ctx, userID); err != nil {
		return nil, err
	}
	listed, err := s.rdb.ZRangeWithScores(ctx, s.keys.sessions(userID), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("auth: listing sessions: %w", err)
	}
	ttls := make([]*redis.DurationCmd, len(listed))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range listed {
			if sum, ok := decodeSum(z.Member); ok {
				ttls[i] = p.PTTL(ctx, s.keys.session(sum))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth: listing sessions: %w", err)
	}
	now := time.Now()
	out := make([]*SessionInfo, 0, len(listed))
	for i, z := range listed {
		created := time.UnixMilli(int64(z.Score))
		end := created.Add(s.opts.SessionMaxAge)
		if ttls[i] == nil || ttls[i].Val() <= 0 || !now.Before(end) { // idle too long, or too old
			continue
		}
		out = append(out, &SessionInfo{ID: z.Member.(string)[:16], CreatedAt: created, ExpiresAt: minTime(now.Add(ttls[i].Val()), end)})
	}
	return out, nil
}

// RevokeSessions ends every session of a user and returns how many were live: at once on this
// server, on the others within their SessionCache. NOT_FOUND if there is no such user. A login
// of the user running meanwhile either ends too or fails.
func (s *Service) RevokeSessions(ctx context.Context, userID int) (int, error) {
	if err := s.checkUser(ctx, userID); err != nil {
		return 0, err
	}
	listed, err := s.rdb.ZRange(ctx, s.keys.sessions(userID), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("auth: listing sessions: %w", err)
	}
	ended := sums(listed)
	live := make([]*redis.IntCmd, len(ended))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sum := range ended {
			live[i] = p.Exists(ctx, s.keys.session(sum))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("auth: listing sessions: %w", err)
	}
	n := 0
	for _, c := range live {
		n += int(c.Val())
	}
	return n, s.endSessions(ctx, userID, ended...)
}

func (s *Service) checkUser(ctx context.Context, userID int) error {
	ok, err := s.db.User.Query().Where(user.ID(userID)).Exist(ctx)
	if err != nil {
		return fmt.Errorf("auth: looking up user: %w", err)
	}
	if !ok {
		return apperr.New(apperr.NotFound, "no user %d", userID)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// roleOf is the role a phone has now: ADMIN if Options.AdminPhones lists it.
func (s *Service) roleOf(phone string) user.Role {
	if s.admins[phone] {
		return user.RoleADMIN
	}
	return user.RoleUSER
}

// SyncRoles brings the users table in line with Options.AdminPhones (sessions follow the
// configuration by themselves, on every request; the table is what `me.role` reads). A server
// calls it at start: an admin removed from the list is a USER from then on, one added is an
// ADMIN before logging in again. It returns how many users changed role.
func (s *Service) SyncRoles(ctx context.Context) (int, error) {
	phones := make([]string, 0, len(s.admins))
	for p := range s.admins {
		phones = append(phones, p)
	}
	demote := s.db.User.Update().Where(user.RoleEQ(user.RoleADMIN))
	if len(phones) > 0 {
		demote.Where(user.PhoneNotIn(phones...))
	}
	demoted, err := demote.SetRole(user.RoleUSER).Save(ctx)
	if err != nil {
		return 0, fmt.Errorf("auth: demoting users no longer in the admin phones: %w", err)
	}
	promoted := 0
	if len(phones) > 0 {
		promoted, err = s.db.User.Update().Where(user.RoleNEQ(user.RoleADMIN), user.PhoneIn(phones...)).
			SetRole(user.RoleADMIN).Save(ctx)
		if err != nil {
			return demoted, fmt.Errorf("auth: promoting the admin phones: %w", err)
		}
	}
	return demoted + promoted, nil
}
