"""The project model: what the other files of the project tell a rule about the file it checks."""
