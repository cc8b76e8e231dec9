package protocol

import "testing"

func benchSend() *SendRequest {
	return &SendRequest{ProducerGroup: "bench-producer", Topic: "bench", QueueID: 3, BornTimestamp: 1700000000000,
		Properties: map[string]string{PropertyTags: "t", PropertyUniqKey: "0A0102032345DEADBEEF01020304ABCD"},
		Body:       make([]byte, 1024)}
}

func BenchmarkEncodeSend1KiB(b *testing.B) {
	req := benchSend()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		var err error
		if buf, err = AppendRequest(buf[:0], 1, 0, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSend1KiB(b *testing.B) {
	frame, err := AppendRequest(nil, 1, 0, benchSend())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		n, err := Split(frame, Limits{})
		if err != nil || n != len(frame) {
			b.Fatal(n, err)
		}
		f, err := DecodeFrame(frame, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeRequest(f, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodePull32x1KiB(b *testing.B) {
	msgs := make([]MessageExt, 32)
	for i := range msgs {
		msgs[i] = sampleExt
		msgs[i].Body = make([]byte, 1024)
	}
	resp := &PullResponse{NextBeginOffset: 32, MaxOffset: 32, Messages: msgs}
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	b.SetBytes(32 * 1024)
	for b.Loop() {
		var err error
		if buf, err = AppendResponse(buf[:0], CodePullMessage, 1, StatusOK, "", resp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePull32x1KiB(b *testing.B) {
	msgs := make([]MessageExt, 32)
	for i := range msgs {
		msgs[i] = sampleExt
		msgs[i].Body = make([]byte, 1024)
	}
	frame, _ := AppendResponse(nil, CodePullMessage, 1, StatusOK, "", &PullResponse{Messages: msgs})
	b.ReportAllocs()
	b.SetBytes(32 * 1024)
	for b.Loop() {
		f, err := DecodeFrame(frame, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		var r PullResponse
		if err := DecodeResponse(f, Limits{}, &r); err != nil || len(r.Messages) != 32 {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSendRaw1KiB is the broker's decode of a SEND: frame,
// fields and properties kept raw (Limits.RawProperties), as netio does.
func BenchmarkDecodeSendRaw1KiB(b *testing.B) {
	frame, err := AppendRequest(nil, 1, 0, benchSend())
	if err != nil {
		b.Fatal(err)
	}
	lim := Limits{RawProperties: true}
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		f, err := DecodeFrame(frame, lim)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeRequest(f, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSendInto1KiB is the broker's decode of a SEND in a burst
// of them: into the burst's slice, strings shared with the send before.
func BenchmarkDecodeSendInto1KiB(b *testing.B) {
	frame, err := AppendRequest(nil, 1, 0, benchSend())
	if err != nil {
		b.Fatal(err)
	}
	lim := Limits{RawProperties: true}
	var f Frame
	var prev, r SendRequest
	if err := DecodeFrameInto(&f, frame, lim); err != nil {
		b.Fatal(err)
	}
	if _, err := DecodeSendInto(&f, lim, &prev, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		if err := DecodeFrameInto(&f, frame, lim); err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeSendInto(&f, lim, &r, &prev); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch is a coalesced batch of n 1 KiB sends, as the client's send
// coalescing makes them.
func benchBatch(n int) *SendBatchRequest {
	s := benchSend()
	req := &SendBatchRequest{ProducerGroup: s.ProducerGroup, Topic: s.Topic, QueueID: -1, BornTimestamp: s.BornTimestamp}
	for range n {
		req.Messages = append(req.Messages, Message{Topic: s.Topic, Properties: s.Properties, Body: s.Body})
	}
	return req
}

// BenchmarkEncodeSendBatch16x1KiB and BenchmarkDecodeSendBatch16x1KiB: a
// SEND_BATCH of 16 messages (async-256's batches are of that order), per
// batch.
func BenchmarkEncodeSendBatch16x1KiB(b *testing.B) {
	req := benchBatch(16)
	buf := make([]byte, 0, 32<<10)
	b.ReportAllocs()
	b.SetBytes(16 << 10)
	for b.Loop() {
		var err error
		if buf, err = AppendRequest(buf[:0], 1, 0, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSendBatch16x1KiB(b *testing.B) {
	frame, err := AppendRequest(nil, 1, 0, benchBatch(16))
	if err != nil {
		b.Fatal(err)
	}
	lim := Limits{RawProperties: true} // as the broker decodes
	b.ReportAllocs()
	b.SetBytes(16 << 10)
	for b.Loop() {
		f, err := DecodeFrame(frame, lim)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeRequest(f, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeSendBatchAnswer16 encodes the answer to a coalesced batch
// of 16 sends, as the broker's writer does for every batch it appends.
func BenchmarkEncodeSendBatchAnswer16(b *testing.B) {
	resp := &SendBatchResponse{QueueID: 3, QueueOffset: 1_234_567}
	for range 16 {
		resp.MsgIDs = append(resp.MsgIDs, "0A000001000027AF00000000DEADBEEF")
	}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendResponse(buf[:0], CodeSendBatchMessage, 1, StatusOK, "", resp); err != nil {
			b.Fatal(err)
		}
	}
}
