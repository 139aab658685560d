"""`settled drill`: cut one consequential task at every dangerous moment, once driven by a transcript
(how today's voice frameworks work) and once through settled's state model, and count what the
business system's own records say happened."""
