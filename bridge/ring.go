package bridge

// fifo is a fixed-capacity ring queue; it never allocates after creation.
type fifo[T any] struct {
	buf     []T
	head, n int
}

func newFifo[T any](capacity int) fifo[T] { return fifo[T]{buf: make([]T, capacity)} }

func (f *fifo[T]) len() int   { return f.n }
func (f *fifo[T]) full() bool { return f.n == len(f.buf) }

func (f *fifo[T]) push(v T) bool {
	if f.n == len(f.buf) {
		return false
	}
	i := f.head + f.n
	if i >= len(f.buf) {
		i -= len(f.buf)
	}
	f.buf[i] = v
	f.n++
	return true
}

// grow appends an element for the caller to fill in place and returns it;
// nil when full.
func (f *fifo[T]) grow() *T {
	if f.n == len(f.buf) {
		return nil
	}
	i := f.head + f.n
	if i >= len(f.buf) {
		i -= len(f.buf)
	}
	f.n++
	return &f.buf[i]
}

// at returns the i-th element from the head.
func (f *fifo[T]) at(i int) *T {
	j := f.head + i
	if j >= len(f.buf) {
		j -= len(f.buf)
	}
	return &f.buf[j]
}

func (f *fifo[T]) peek() *T { return f.at(0) }

func (f *fifo[T]) pop() T {
	v := f.buf[f.head]
	var zero T
	f.buf[f.head] = zero
	f.head++
	if f.head == len(f.buf) {
		f.head = 0
	}
	f.n--
	return v
}

// removeAt removes and returns the i-th element from the head, shifting
// the ones before it back by one.
func (f *fifo[T]) removeAt(i int) T {
	v := *f.at(i)
	f.drop(i)
	return v
}

// drop is removeAt for a caller that read the element through at: the
// data path spares itself copying it out.
func (f *fifo[T]) drop(i int) {
	for j := i; j > 0; j-- {
		*f.at(j) = *f.at(j - 1)
	}
	var zero T
	f.buf[f.head] = zero
	f.head++
	if f.head == len(f.buf) {
		f.head = 0
	}
	f.n--
}

func (f *fifo[T]) clear() {
	for f.n > 0 {
		f.pop()
	}
	f.head = 0
}

// pool is a set of equal-size byte slots carved from one allocation.
type pool struct {
	data []byte
	size int
	free []int32
}

func newPool(n, size int) pool {
	p := pool{data: make([]byte, n*size), size: size, free: make([]int32, n)}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i)
	}
	return p
}

func (p *pool) get() int32 {
	if len(p.free) == 0 {
		return -1
	}
	i := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return i
}

func (p *pool) put(i int32) { p.free = append(p.free, i) }

func (p *pool) capacity() int { return len(p.data) / p.size }

func (p *pool) bytes(i int32, n int) []byte {
	off := int(i) * p.size
	return p.data[off : off+n : off+p.size]
}

// Sequence numbers are 32-bit and compared modulo 2^32.
func seqLT(a, b uint32) bool  { return int32(a-b) < 0 }
func seqLEQ(a, b uint32) bool { return int32(a-b) <= 0 }
