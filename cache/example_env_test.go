package cache_test

import "github.com/surgekit/surge/internal/testenv"

// The examples read REDIS_ADDR (and MYSQL_DSN) as their reader's program would; under go test
// they use the test suite's services.
func init() { testenv.ExampleServices() }
