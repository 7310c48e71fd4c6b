package gpu

// fifo is a first-in first-out queue that reuses its storage: popping
// moves a head index instead of reslicing forward (which would give the
// front of the array away and make a later push allocate), and the
// queue rewinds whenever it empties.
type fifo[T any] struct {
	q    []T
	head int
}

func (f *fifo[T]) len() int { return len(f.q) - f.head }

func (f *fifo[T]) push(v T) { f.q = append(f.q, v) }

// front returns the oldest element; the queue must not be empty.
func (f *fifo[T]) front() *T { return &f.q[f.head] }

// pop removes the oldest element; the queue must not be empty.
func (f *fifo[T]) pop() T {
	var zero T
	v := f.q[f.head]
	f.q[f.head] = zero // drop references
	f.head++
	switch {
	case f.head == len(f.q):
		f.q, f.head = f.q[:0], 0
	case f.head >= 1024 && 2*f.head >= len(f.q):
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	return v
}

// at returns the i-th oldest element.
func (f *fifo[T]) at(i int) *T { return &f.q[f.head+i] }
