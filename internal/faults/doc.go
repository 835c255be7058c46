// Package faults holds no code: its tests break the flash-sale flow on purpose, with the real
// surge binary as the server and order consumer, on real Redis and MariaDB (private instances
// on other ports for the destructive ones, so the shared services keep serving other tests).
//
//   - consumer processes SIGKILLed at random moments during a drain, and restarted;
//   - a private MariaDB stopped mid-drain (8 s; 30 s with SECKILL_FAULTS_LONG=1);
//   - a private Redis with AOF restarted mid-sale (SIGTERM and SIGKILL, appendfsync always and
//     everysec), and flushed mid-sale.
//
// SECKILL_FAULTS_LONG=1 runs the long versions (more kills, larger backlogs, a 30 s outage).
package faults
