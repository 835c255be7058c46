package seckill

// ReplicaAckWaits is how many WAITs s's admission has sent (0 without Options.ReplicaAcks).
func ReplicaAckWaits(s *Service) int64 {
	if s.admission.acks == nil {
		return 0
	}
	return s.admission.acks.waits.Load()
}
