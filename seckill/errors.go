package seckill

import "errors"

// Reasons a grab is refused. Test with errors.Is.
var (
	ErrSoldOut          = errors.New("seckill: sold out")
	ErrAlreadyPurchased = errors.New("seckill: already purchased")
	ErrNotStarted       = errors.New("seckill: the sale has not started")
	ErrEnded            = errors.New("seckill: the sale has ended")
	// ErrNotReady means Redis does not hold the voucher's sale state (never warmed, or lost);
	// a rebuild has been started and the client should retry shortly.
	ErrNotReady    = errors.New("seckill: not ready, retry shortly")
	ErrRateLimited = errors.New("seckill: too many attempts, slow down")
	// ErrNoSuchVoucher means the voucher does not exist or is not a seckill voucher.
	ErrNoSuchVoucher = errors.New("seckill: no such seckill voucher")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("seckill: service closed")
)
