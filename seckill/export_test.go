package seckill

// AdmissionCalls is how many admission-script calls s's batcher has sent.
func AdmissionCalls(s *Service) int64 { return s.batch.calls.Load() }
