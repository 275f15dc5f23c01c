package media

// DerivedKey exposes derivedKey to the package's tests.
var DerivedKey = derivedKey

// ParseFrameRate exposes parseFrameRate to the package's tests.
var ParseFrameRate = parseFrameRate
