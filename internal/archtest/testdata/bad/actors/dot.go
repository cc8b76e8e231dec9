package actors

import . "time" // want seams: import . "time": a dot import hides clock reads

var _ = Now
