"""requestlog"""
