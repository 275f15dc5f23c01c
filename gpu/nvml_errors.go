package gpu

import "errors"

func isNotSupported(err error) bool { return errors.Is(err, ErrNotSupported) }
