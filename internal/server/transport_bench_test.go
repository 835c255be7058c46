package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// BenchmarkTransportGrab: what the HTTP transport does around a seckillVoucher grab: the
// body read into the operation's parameters, and the answer most grabs of a sale get
// (ALREADY_PURCHASED) written out.
func BenchmarkTransportGrab(b *testing.B) {
	tr := httpTransport{maxBody: 1 << 20, limits: DocumentLimits{MaxTokens: 2000, MaxNesting: 32}}
	tr.limits.setDefaults()
	body := []byte(`{"query":"mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status } }","variables":{"v":"17179869186"}}`)
	resp := &graphql.Response{
		Errors: gqlerror.List{{Message: "you already have an order for this voucher (order 81604378625)",
			Path:       ast.Path{ast.PathName("seckillVoucher")},
			Extensions: map[string]any{"code": "ALREADY_PURCHASED", "orderId": "81604378625"}}},
		Data: json.RawMessage(`{"seckillVoucher":null}`),
	}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		p, err := tr.decodeBody(body, h)
		if err != nil || p.Variables["v"] != "17179869186" {
			b.Fatal(err, p)
		}
		w := httptest.NewRecorder()
		writeResponse(w, mediaGraphQLResponse, http.StatusOK, resp)
	}
}
